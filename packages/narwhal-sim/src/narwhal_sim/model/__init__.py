"""The simulated deployment's model, below the engines and the router: the latency presets and
the step-time model every simulated GPU follows (``_presets``), continuous batching on shared
devices (``_scheduler``), one finished request's latencies (``_timings``), the scheduler on a
virtual clock (``_virtual``), and the ``narwhal.sim`` config resolved into each engine's settings
(``_config``)."""
