"""Building a new store and its sidecar as the pair :func:`write_store` expects."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from narwhal_store._fields import PENDING_SHA256, Generator, Mode
from narwhal_store._profiles import Profile, ProfileStore, SamplesRef
from narwhal_store._samples import ProfileSamples, SamplesSidecar, Source

__all__ = ["new_documents"]

#: The sidecar name recorded before :func:`write_store` names the real one.
_PENDING_NAME = "pending.samples.json"


def new_documents(
    *,
    mode: Mode,
    fleet_sha256: str,
    generator: Generator,
    profiles: Sequence[Profile],
    samples: Sequence[ProfileSamples],
    sources: Sequence[Source] = (),
    created_at: str | None = None,
    samples_name: str = _PENDING_NAME,
) -> tuple[ProfileStore, SamplesSidecar]:
    """A store holding ``profiles`` and its sidecar holding ``samples``, written by ``generator``.

    Both documents share ``mode``, ``fleet_sha256`` and ``created_at`` (default: now, UTC, to the
    second). The digests are ``PENDING_SHA256`` placeholders that :func:`write_store` fills in
    (it also records the sidecar's real name; ``samples_name`` is what stands until then).
    Both are ``format_version`` 1 unless a profile holds mixing points or a mixing fit (2).
    """
    when = created_at or datetime.now(UTC).isoformat(timespec="seconds")
    # the lowest version that holds the content: 2 only with mixing points (docs/design.md §7)
    version: Literal[1, 2] = (
        2 if any(s.mixing_samples for s in samples) or any(p.mixing_fit for p in profiles) else 1
    )
    store = ProfileStore(
        format="narwhal.profiles",
        format_version=version,
        generator=generator,
        created_at=when,
        mode=mode,
        fleet_sha256=fleet_sha256,
        samples=SamplesRef(path=samples_name, sha256=PENDING_SHA256),
        profiles=list(profiles),
    )
    sidecar = SamplesSidecar(
        format="narwhal.samples",
        format_version=version,
        generator=generator,
        created_at=when,
        mode=mode,
        fleet_sha256=fleet_sha256,
        profiles=list(samples),
        sources=list(sources),
    )
    return store, sidecar
