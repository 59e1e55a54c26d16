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
from narwhal_store import EngineLimits, SchedulerSettings

if TYPE_CHECKING:  # the result printer uses this module; it needs no HTTP client
    from narwhal_engine_client import SchedulerConfig

MISMATCH_CODE = "scheduler_mismatch"


def _source(shown: object, given: object) -> dict[str, Any]:
    """``{value, source}``: the engine's value, else the limits file's, else unknown."""
    if shown is not None:
        return {"value": shown, "source": "engine"}
    if given is not None:
        return {"value": given, "source": "limits"}
    return {"value": None, "source": "unknown"}


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
        live, written = getattr(shown, key, None), getattr(given, key, None)
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
    keys = {
        "max_num_batched_tokens": "max_num_batched_tokens",
        "max_num_seqs": "max_num_seqs",
        "chunked_prefill": "enable_chunked_prefill",
    }
    return SchedulerSettings.model_validate(
        {
            setting: _source(getattr(shown, key, None), getattr(given, key, None))
            for setting, key in keys.items()
        }
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
