"""Injected faults: what each one does and how a JSON patch changes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from narwhal_sim._errors import SimConfigError

_HTTP_ERROR_STATUSES = (429, 500, 503)


@dataclass(slots=True)
class HttpErrorFault:
    """Answer ``/v1/completions`` with ``status`` for a ``rate`` fraction of requests."""

    status: int
    rate: float


@dataclass(slots=True)
class Faults:
    """The faults active on one engine (every field ``None``/false means healthy)."""

    health_status: int | None = None
    tokenize_max_model_len: int | str | None = None  # an int, or "missing" to omit the field
    models_max_model_len: int | str | None = None
    http_error: HttpErrorFault | None = None
    cut_after_tokens: int | None = None
    # the usage chunk reports this many more completion tokens than the content chunks carried
    usage_excess_tokens: int | None = None
    stream_error_after_tokens: int | None = None
    stall: bool = False
    noise: float | None = None
    version: str | None = None
    prefix_caching: bool | None = None
    # a request arriving on a connection idle longer than this many seconds is dropped unanswered
    # and the connection closed: the client always loses the keep-alive race
    drop_idle_after_s: float | None = None
    # with an OTLP traces endpoint: every Nth request finishing after this is set exports no span
    span_drop_every: int | None = None
    # every step that decodes without a prefill chunk takes this many simulated seconds longer:
    # host work that slows the quiet decode stretches and spares the prefills, so a short prefill's
    # measured mixing loss comes out below zero (seen on vLLM's CPU server beside other work)
    decode_drag_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view (``GET /_sim/state``)."""
        return asdict(self)

    def merged(self, patch: Mapping[str, Any]) -> Faults:
        """A copy with ``patch`` applied: present keys replace, ``null`` clears."""
        known = {f.name for f in fields(Faults)}
        unknown = sorted(set(patch) - known)
        if unknown:
            raise SimConfigError(
                f"unknown fault(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return replace(self, **{key: _check(key, value) for key, value in patch.items()})


def _int(key: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SimConfigError(f"fault {key}: expected an integer >= {minimum}, got {value!r}")
    return value


def _len_fault(key: str, value: Any) -> int | str:
    if value == "missing":
        return "missing"
    if isinstance(value, bool) or not isinstance(value, int):
        raise SimConfigError(f'fault {key}: expected an integer or "missing", got {value!r}')
    return value


def _check(key: str, value: Any) -> Any:
    if value is None:
        return False if key == "stall" else None
    if key == "health_status":
        return _int(key, value, minimum=100)
    if key in ("tokenize_max_model_len", "models_max_model_len"):
        return _len_fault(key, value)
    if key in ("cut_after_tokens", "stream_error_after_tokens", "usage_excess_tokens"):
        return _int(key, value, minimum=0)
    if key == "span_drop_every":
        return _int(key, value, minimum=1)
    if key == "stall" or key == "prefix_caching":
        if not isinstance(value, bool):
            raise SimConfigError(f"fault {key}: expected true or false, got {value!r}")
        return value
    if key == "noise":
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 10:
            raise SimConfigError(
                f"fault noise: expected a relative sigma in [0, 10], got {value!r}"
            )
        return float(value)
    if key == "decode_drag_s":
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise SimConfigError(f"fault {key}: expected seconds in [0, 1], got {value!r}")
        return float(value)
    if key == "drop_idle_after_s":
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise SimConfigError(f"fault {key}: expected seconds >= 0, got {value!r}")
        return float(value)
    if key == "version":
        if not isinstance(value, str) or not value:
            raise SimConfigError(f"fault version: expected a non-empty string, got {value!r}")
        return value
    # http_error
    if not isinstance(value, Mapping) or set(value) - {"status", "rate"}:
        raise SimConfigError(
            f'fault http_error: expected {{"status": 429|500|503, "rate": 0..1}}, got {value!r}'
        )
    status = value.get("status", 500)
    rate = value.get("rate", 1.0)
    if status not in _HTTP_ERROR_STATUSES:
        raise SimConfigError(
            f"fault http_error.status: expected one of 429, 500, 503, got {status!r}"
        )
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise SimConfigError(f"fault http_error.rate: expected a number in [0, 1], got {rate!r}")
    return HttpErrorFault(status=int(status), rate=float(rate))
