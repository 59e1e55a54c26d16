"""The engine's scheduler settings a profile records, each with its source (docs/design.md §13).

Precedence, setting by setting: what the engine shows (``/server_info`` of a vLLM running with
``VLLM_SERVER_DEV_MODE=1``; source ``engine``), else the limits file (``max_num_batched_tokens``,
``max_num_seqs``, ``enable_chunked_prefill``; source ``limits``), else ``unknown``. A budget or a
chunked-prefill setting the engine shows that the limits file contradicts aborts the sweep before
anything is measured. ``max_num_seqs`` in the limits file also caps the sweep's concurrencies
(``_preflight.kept_points``), whatever the engine shows, so it is never compared.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from narwhal_profile_cli._errors import ProfileAbortError
from narwhal_store import BoolSetting, EngineLimits, IntSetting, SchedulerSettings

if TYPE_CHECKING:  # the result printer uses this module; it needs no HTTP client
    from narwhal_engine_client import SchedulerConfig

MISMATCH_CODE = "scheduler_mismatch"


def _int(shown: int | None, given: int | None) -> IntSetting:
    if shown is not None:
        return IntSetting(value=shown, source="engine")
    if given is not None:
        return IntSetting(value=given, source="limits")
    return IntSetting(value=None, source="unknown")


def _bool(shown: bool | None, given: bool | None) -> BoolSetting:
    if shown is not None:
        return BoolSetting(value=shown, source="engine")
    if given is not None:
        return BoolSetting(value=given, source="limits")
    return BoolSetting(value=None, source="unknown")


def _json(value: object) -> str:
    """A value as the limits file spells it (``true``, ``2048``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def scheduler_settings(
    iid: str,
    shown: SchedulerConfig | None,
    given: EngineLimits | None,
    limits_path: Path | None = None,
) -> SchedulerSettings:
    """Engine ``iid``'s settings from what it shows (``shown``) and its limits (``given``).

    A ``max_num_batched_tokens`` or ``enable_chunked_prefill`` that both give, differently, is a
    ProfileAbortError (code ``scheduler_mismatch``) naming the engine, the key, both values and
    the limits file.
    """
    problems = []
    for key in ("max_num_batched_tokens", "enable_chunked_prefill"):
        live = None if shown is None else getattr(shown, key)
        written = None if given is None else getattr(given, key)
        if live is not None and written is not None and live != written:
            problems.append(
                f"the engine shows {key} {_json(live)} but the limits file gives {_json(written)}"
            )
    if problems:
        where = "the limits file" if limits_path is None else f"limits file {limits_path}"
        raise ProfileAbortError(
            f"engine {iid}: " + "; ".join(problems) + f" ({where}: correct it, or leave the key "
            "out to record the engine's own value)",
            engine=iid,
            code=MISMATCH_CODE,
        )
    return SchedulerSettings(
        max_num_batched_tokens=_int(
            None if shown is None else shown.max_num_batched_tokens,
            None if given is None else given.max_num_batched_tokens,
        ),
        max_num_seqs=_int(
            None if shown is None else shown.max_num_seqs,
            None if given is None else given.max_num_seqs,
        ),
        chunked_prefill=_bool(
            None if shown is None else shown.enable_chunked_prefill,
            None if given is None else given.enable_chunked_prefill,
        ),
    )


def scheduler_summary(doc: dict[str, Any]) -> str:
    """A profile's ``scheduler`` (its JSON form) in words: ``budget 2048 tokens (engine),
    max_num_seqs 8 (limits), chunked prefill unknown``."""
    budget, seqs, chunked = (
        doc["max_num_batched_tokens"],
        doc["max_num_seqs"],
        doc["chunked_prefill"],
    )

    def told(setting: dict[str, Any], text: str) -> str:
        return f"{text} ({setting['source']})"

    parts = [
        "budget unknown"
        if budget["value"] is None
        else told(budget, f"budget {budget['value']} tokens"),
        "max_num_seqs unknown"
        if seqs["value"] is None
        else told(seqs, f"max_num_seqs {seqs['value']}"),
        "chunked prefill unknown"
        if chunked["value"] is None
        else told(chunked, f"chunked prefill {'on' if chunked['value'] else 'off'}"),
    ]
    return ", ".join(parts)
