"""narwhal_engine_client: an async client for one vLLM engine.

Streaming completions with monotonic per-chunk timing (``EngineClient.stream_completion`` →
``StreamRecord``, over httpx or the opt-in raw HTTP/1.1 transport), ``/health``, ``/version``,
``/v1/models``, ``/tokenize``, ``/detokenize``, parsed ``/metrics`` (``MetricsSnapshot``), the
scheduler settings of a development-mode engine's ``/server_info`` (``SchedulerConfig``),
plus the evidence documents of docs/design.md §6 (``gather_identity``, ``gather_attestation``,
``evidence_sha256``). Every error derives from ``EngineClientError`` (see ``_errors`` for the
tree).
"""

from narwhal_engine_client._body import completion_body
from narwhal_engine_client._canonical import canonical_json, sha256_hex
from narwhal_engine_client._client import (
    DEFAULT_KEEPALIVE_EXPIRY_S,
    EngineClient,
    StreamTransport,
)
from narwhal_engine_client._counting import TokenCounting, token_counting, version_tuple
from narwhal_engine_client._errors import (
    ContractMismatchError,
    EngineClientError,
    EngineConnectError,
    EngineHTTPError,
    EngineProtocolError,
    EngineStreamError,
    EngineTimeoutError,
    SendDeadlineError,
    StreamCutError,
)
from narwhal_engine_client._evidence import evidence_sha256, gather_attestation, gather_identity
from narwhal_engine_client._gcpause import gc_paused
from narwhal_engine_client._metrics import MetricFamily, MetricSample, MetricsSnapshot
from narwhal_engine_client._record import StreamRecord
from narwhal_engine_client._replies import ModelCard, TokenizeResult, select_model
from narwhal_engine_client._server_info import SchedulerConfig

__all__ = [
    "DEFAULT_KEEPALIVE_EXPIRY_S",
    "ContractMismatchError",
    "EngineClient",
    "EngineClientError",
    "EngineConnectError",
    "EngineHTTPError",
    "EngineProtocolError",
    "EngineStreamError",
    "EngineTimeoutError",
    "MetricFamily",
    "MetricSample",
    "MetricsSnapshot",
    "ModelCard",
    "SchedulerConfig",
    "SendDeadlineError",
    "StreamCutError",
    "StreamRecord",
    "StreamTransport",
    "TokenCounting",
    "TokenizeResult",
    "canonical_json",
    "completion_body",
    "evidence_sha256",
    "gather_attestation",
    "gather_identity",
    "gc_paused",
    "select_model",
    "sha256_hex",
    "token_counting",
    "version_tuple",
]
