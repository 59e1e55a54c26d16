"""narwhal_sim: a vLLM-compatible simulated GPU fleet (engines, shared devices, router, faults).

Library entry points used by tests and benchmarks: the latency presets and the model functions
(``idle_ttft_s``, ``tpot_s``) that the simulated engines follow; ``narwhal_sim.testing`` starts a
fleet as a subprocess; ``encode_export_request`` is the OTLP trace encoder the engines' span
export uses; ``write_model_folder`` writes a HuggingFace model folder of the simulator's
tokenizer. The command is ``narwhal-sim`` (``python -m narwhal_sim``).
"""

from narwhal_sim._errors import SimConfigError, SimError, SimStartError
from narwhal_sim._faults import Faults, HttpErrorFault
from narwhal_sim._model_folder import MODEL_FILES, write_model_folder
from narwhal_sim._tokenizer import BOS_ID, EOS_ID, VOCAB_SIZE, decode, encode
from narwhal_sim.engine._otlp import OtlpSpan, encode_export_request
from narwhal_sim.model._presets import (
    DEFAULT_PRESET,
    Preset,
    decode_step_s,
    get_preset,
    idle_ttft_s,
    prefill_chunk_s,
    presets,
    tpot_s,
)

__all__ = [
    "BOS_ID",
    "DEFAULT_PRESET",
    "EOS_ID",
    "MODEL_FILES",
    "VOCAB_SIZE",
    "Faults",
    "HttpErrorFault",
    "OtlpSpan",
    "Preset",
    "SimConfigError",
    "SimError",
    "SimStartError",
    "decode",
    "decode_step_s",
    "encode",
    "encode_export_request",
    "get_preset",
    "idle_ttft_s",
    "prefill_chunk_s",
    "presets",
    "tpot_s",
    "write_model_folder",
]
