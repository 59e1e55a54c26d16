"""What a frontend that is not ours publishes of the workers behind it (NVIDIA Dynamo's OpenAI
frontend): the scheduler settings and context length of a served model, read from its
``dynamo_frontend_model_*`` gauges.

Dynamo's workers serve no HTTP, so these gauges are the only place ``prepare``, ``run``,
``check`` and ``predict`` can read them: ``dynamo_frontend_model_max_num_seqs``,
``..._max_num_batched_tokens`` and ``..._context_length`` (0 when the worker reports none, as
Dynamo's mocker engine does), each labelled with the served model's name. This module only reads
a page it is given (``predict`` imports it and contacts nothing); ``server._frontend`` fetches one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import Field

from narwhal_store import ClosedModel, Profile

DYNAMO_PREFIX = "dynamo_frontend_"
SEQS = "dynamo_frontend_model_max_num_seqs"
BATCHED = "dynamo_frontend_model_max_num_batched_tokens"
CONTEXT = "dynamo_frontend_model_context_length"
GAUGES = (SEQS, BATCHED, CONTEXT)


class MetricsPage(Protocol):
    """What is read of a ``/metrics`` page (``narwhal_engine_client.MetricsSnapshot``, which this
    module does not import: ``predict``'s modules contact nothing)."""

    @property
    def families(self) -> Mapping[str, Any]: ...

    def value(self, name: str, **labels: str) -> float | None: ...


class FrontendScheduler(ClosedModel):
    """A model's scheduler settings as a frontend publishes them (None: not published or 0)."""

    source: str = Field(description="the page and the gauges read")
    model: str
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    context_length: int | None = None


def is_dynamo_page(snapshot: MetricsPage) -> bool:
    """Whether a ``/metrics`` page is a Dynamo frontend's (``dynamo_frontend_*`` families)."""
    return any(name.startswith(DYNAMO_PREFIX) for name in snapshot.families)


def _positive(snapshot: MetricsPage, name: str, model: str) -> int | None:
    value = snapshot.value(name, model=model)
    if value is None or not value > 0 or value != int(value):
        return None
    return int(value)


def frontend_scheduler(snapshot: MetricsPage, model: str, url: str) -> FrontendScheduler | None:
    """The settings ``snapshot`` (``url``'s page) publishes for ``model``; None when it publishes
    none of them (not a Dynamo frontend, or not for that model)."""
    if all(snapshot.value(name, model=model) is None for name in GAUGES):
        return None
    return FrontendScheduler(
        source=f"{url} dynamo_frontend_model_* gauges",
        model=model,
        max_num_seqs=_positive(snapshot, SEQS, model),
        max_num_batched_tokens=_positive(snapshot, BATCHED, model),
        context_length=_positive(snapshot, CONTEXT, model),
    )


def describe(settings: FrontendScheduler) -> str:
    """``max_num_seqs 256, max_num_batched_tokens 8192`` (``not published`` for a missing one)."""

    def shown(value: int | None) -> str:
        return "not published" if value is None else str(value)

    return (
        f"max_num_seqs {shown(settings.max_num_seqs)}, "
        f"max_num_batched_tokens {shown(settings.max_num_batched_tokens)}"
    )


def profile_differences(settings: FrontendScheduler, profile: Profile | None) -> list[str]:
    """Where the frontend's published settings differ from those a profile was measured under
    (``max_num_seqs 256 here, 128 in the profile``); settings either side lacks are not compared."""
    if profile is None or profile.scheduler is None:
        return []
    out: list[str] = []
    for name in ("max_num_seqs", "max_num_batched_tokens"):
        published = getattr(settings, name)
        measured = getattr(profile.scheduler, name).value
        if published is not None and measured is not None and published != measured:
            out.append(f"{name} {published} here, {measured} in the profile")
    return out


def models_published(snapshot: MetricsPage) -> list[str]:
    """The models a page publishes scheduler settings for (its ``max_num_seqs`` gauge's labels)."""
    family = snapshot.families.get(SEQS)
    samples = getattr(family, "samples", ())
    return sorted({m for s in samples if (m := s.labels.get("model", ""))})
