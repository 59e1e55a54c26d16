"""One simulated vLLM engine and its HTTP surface, on top of the model: the engine's routes, auth
and faults (``_engine``), ``/v1/completions`` validation and bodies (``_completions``,
``_bodies``), the streamed answer (``_stream``), the informational routes (``_info``), the
``/metrics`` page (``_metrics``), the engine's own busy time (``_activity``), and its per-request
trace spans with their OTLP/HTTP export (``_spans``, ``_otlp``)."""
