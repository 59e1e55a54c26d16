"""An engine's scheduler settings as a profile records them, each with where it came from.

``engine``: read from the engine itself (vLLM shows its scheduler configuration only at
``GET /server_info?config_format=json``, which exists when the server runs with
``VLLM_SERVER_DEV_MODE=1``; docs/design.md §13). ``limits``: given by the operator in the limits
file. ``unknown``: neither; a reader falls back to its own default and says so.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from narwhal_store._fields import LocatedValueError, PosInt, StrictModel

__all__ = ["BoolSetting", "IntSetting", "SchedulerSettings", "SettingSource"]

SettingSource = Literal["engine", "limits", "unknown"]


def _check(value: object, source: str) -> None:
    if (value is None) != (source == "unknown"):
        raise LocatedValueError(
            "value", f"a value comes with source engine or limits, none with unknown ({source})"
        )


class IntSetting(StrictModel):
    """One integer setting: its value (None when unknown) and its source."""

    value: PosInt | None
    source: SettingSource

    @model_validator(mode="after")
    def _paired(self) -> Self:
        _check(self.value, self.source)
        return self


class BoolSetting(StrictModel):
    """One on/off setting: its value (None when unknown) and its source."""

    value: bool | None
    source: SettingSource

    @model_validator(mode="after")
    def _paired(self) -> Self:
        _check(self.value, self.source)
        return self


class SchedulerSettings(StrictModel):
    """The engine's per-step token budget, its running-sequence cap, and chunked prefill."""

    max_num_batched_tokens: IntSetting
    max_num_seqs: IntSetting
    chunked_prefill: BoolSetting

    @classmethod
    def unknown(cls) -> SchedulerSettings:
        """Every setting unknown."""
        return cls(
            max_num_batched_tokens=IntSetting(value=None, source="unknown"),
            max_num_seqs=IntSetting(value=None, source="unknown"),
            chunked_prefill=BoolSetting(value=None, source="unknown"),
        )
