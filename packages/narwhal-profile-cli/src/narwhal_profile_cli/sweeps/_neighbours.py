"""Colocated neighbour traffic (docs/design.md §4): open-loop load on a target's shared-GPU peers.

While a target engine is measured, every other engine in its ``shared_device.group`` receives
open-loop traffic by its own role: prefill neighbours ``prefill_rps`` requests of
``prefill_tokens`` input tokens and one output token; decode and mixed neighbours ``decode_rps``
requests of ``decode_input_tokens`` input and ``decode_output_tokens`` output tokens. Offers follow
an absolute schedule ``t0 + k / rate`` and each request is its own task, so a slow answer never
delays the next offer. ``mark()`` opens the target's interval; ``records_since_mark()`` reports per
neighbour what completed (and failed) inside it. The reference: "a stalled or failed neighbour
rejects that profile's measured role mix".
"""

from __future__ import annotations

import asyncio
import math
import random
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self

from narwhal_engine_client import EngineClient, TokenCounting, completion_body
from narwhal_profile_cli._errors import ProfileAbortError, ProfileUsageError
from narwhal_store import NeighbourRecord

Role = Literal["prefill", "decode", "mixed"]

_MAX_IN_FLIGHT = 256  # per neighbour; an offer due beyond this is skipped and recorded as an error
_MAX_ERROR_TEXTS = 20  # per neighbour and interval; further errors are counted in one closing line
_ERROR_TEXT_LIMIT = 160


@dataclass(frozen=True, slots=True)
class NeighbourSettings:
    """The five ``--neighbour-*`` options: offered rates (req/s) and token counts per request."""

    prefill_rps: float
    decode_rps: float
    prefill_tokens: int
    decode_input_tokens: int
    decode_output_tokens: int

    def __post_init__(self) -> None:
        for name in ("prefill_rps", "decode_rps"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ProfileUsageError(
                    f"--neighbour-{name.replace('_', '-')} must be finite and positive, "
                    f"got {value!r}"
                )
        for name in ("prefill_tokens", "decode_input_tokens", "decode_output_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ProfileUsageError(
                    f"--neighbour-{name.replace('_', '-')} must be a positive integer, "
                    f"got {value!r}"
                )

    def rate(self, role: Role) -> float:
        """Offered requests per second for a neighbour of ``role``."""
        return self.prefill_rps if role == "prefill" else self.decode_rps

    def tokens(self, role: Role) -> tuple[int, int]:
        """``(input_tokens, output_tokens)`` of one request to a neighbour of ``role``."""
        if role == "prefill":
            return self.prefill_tokens, 1
        return self.decode_input_tokens, self.decode_output_tokens


@dataclass(frozen=True, slots=True)
class Neighbour:
    """One peer of the target in its shared GPU group, with its live facts from preflight."""

    iid: str
    role: Role
    client: EngineClient
    model: str
    max_model_len: int
    pool: Sequence[int]
    counting: TokenCounting


def check_neighbour_fit(neighbours: Sequence[Neighbour], settings: NeighbourSettings) -> None:
    """Refuse token counts that do not fit a neighbour's live ``max_model_len`` (exit 2)."""
    for nb in neighbours:
        inp, out = settings.tokens(nb.role)
        if inp + out > nb.max_model_len:
            raise ProfileUsageError(
                f"neighbour {nb.iid} ({nb.role}): {inp} input + {out} output tokens exceed "
                f"its live max_model_len {nb.max_model_len}",
                engine=nb.iid,
            )
        if not nb.pool:
            raise ProfileUsageError(f"neighbour {nb.iid}: empty token pool", engine=nb.iid)


def check_neighbours(records: Sequence[NeighbourRecord]) -> None:
    """Reject the profile when a neighbour completed nothing in the interval or had errors."""
    for rec in records:
        if rec.errors:
            raise ProfileAbortError(
                f"neighbour {rec.iid} ({rec.role}) failed during the target's interval "
                f"({len(rec.errors)} error(s), first: {rec.errors[0]}); a stalled or failed "
                "neighbour rejects that profile's measured role mix",
                engine=rec.iid,
                code="neighbour_failed",
            )
        if rec.completions == 0:
            raise ProfileAbortError(
                f"neighbour {rec.iid} ({rec.role}) completed no request in the target's "
                f"{rec.interval_s:.3g} s interval (offered {rec.offered_rps:g} req/s); a stalled "
                "or failed neighbour rejects that profile's measured role mix",
                engine=rec.iid,
                code="neighbour_stalled",
            )


@dataclass(slots=True)
class _Tally:
    """Per-neighbour state shared by its scheduler and its request tasks."""

    neighbour: Neighbour
    rate: float
    input_tokens: int
    output_tokens: int
    rng: random.Random
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    #: since the last mark: completion times, and (time, short text) of each failure
    done_ns: list[int] = field(default_factory=list)
    error_ns: list[tuple[int, str]] = field(default_factory=list)


class NeighbourLoad:
    """Async context manager driving open-loop traffic on every neighbour while it is entered."""

    def __init__(
        self,
        neighbours: Sequence[Neighbour],
        settings: NeighbourSettings,
        *,
        seed: int,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self._clock_ns = clock_ns
        self._tallies: list[_Tally] = []
        for nb in neighbours:
            inp, out = settings.tokens(nb.role)
            self._tallies.append(
                _Tally(nb, settings.rate(nb.role), inp, out, random.Random(f"{seed}:{nb.iid}"))
            )
        self._schedulers: list[asyncio.Task[None]] = []
        self._mark_ns: int | None = None

    async def __aenter__(self) -> Self:
        t0 = self._clock_ns()
        self._mark_ns = t0
        self._schedulers = [
            asyncio.create_task(self._schedule(tally, t0), name=f"neighbour-{tally.neighbour.iid}")
            for tally in self._tallies
        ]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop offering and cancel every in-flight neighbour request."""
        tasks: list[asyncio.Task[None]] = list(self._schedulers)
        for tally in self._tallies:
            tasks.extend(tally.in_flight)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._schedulers = []

    def mark(self) -> None:
        """Open the target's measurement interval: later records count only what ends after now."""
        self._mark_ns = self._clock_ns()
        for tally in self._tallies:
            tally.done_ns.clear()
            tally.error_ns.clear()

    def records_since_mark(self) -> list[NeighbourRecord]:
        """Per neighbour: completions and errors between the last ``mark()`` (or entry) and now."""
        start = self._mark_ns if self._mark_ns is not None else self._clock_ns()
        now = self._clock_ns()
        interval_s = max(now - start, 1) / 1e9
        records = []
        for tally in self._tallies:
            done = sum(1 for t in tally.done_ns if start <= t <= now)
            texts = [text for t, text in tally.error_ns if start <= t <= now]
            errors = texts[:_MAX_ERROR_TEXTS]
            if len(texts) > _MAX_ERROR_TEXTS:
                errors.append(f"... and {len(texts) - _MAX_ERROR_TEXTS} more error(s)")
            records.append(
                NeighbourRecord(
                    iid=tally.neighbour.iid,
                    role=tally.neighbour.role,
                    offered_rps=tally.rate,
                    completions=done,
                    achieved_rps=done / interval_s,
                    errors=errors,
                    interval_s=interval_s,
                )
            )
        return records

    async def _schedule(self, tally: _Tally, t0: int) -> None:
        period_ns = 1e9 / tally.rate
        k = 0
        while True:
            due = t0 + round(k * period_ns)
            wait_ns = due - self._clock_ns()
            # behind schedule: send at once (open loop), but let the request tasks run
            await asyncio.sleep(wait_ns / 1e9 if wait_ns > 0 else 0)
            if len(tally.in_flight) >= _MAX_IN_FLIGHT:
                tally.error_ns.append(
                    (self._clock_ns(), f"offer {k} skipped: {_MAX_IN_FLIGHT} requests in flight")
                )
            else:
                task = asyncio.create_task(self._request(tally, k))
                tally.in_flight.add(task)
                task.add_done_callback(tally.in_flight.discard)
            k += 1

    async def _request(self, tally: _Tally, k: int) -> None:
        nb = tally.neighbour
        prompt = tally.rng.choices(nb.pool, k=tally.input_tokens)
        body = completion_body(
            model=nb.model,
            prompt=prompt,
            max_tokens=tally.output_tokens,
            token_counting=nb.counting,
        )
        request_id = f"narwhal-neighbour-{nb.iid}-{k}-{secrets.token_hex(4)}"
        try:
            record = await nb.client.stream_completion(body, request_id=request_id)
        except Exception as exc:  # stream_completion records request failures; anything else too
            text = f"request {k}: {type(exc).__name__}: {exc}"
            tally.error_ns.append((self._clock_ns(), text[:_ERROR_TEXT_LIMIT]))
            return
        now = self._clock_ns()
        if record.error is not None:
            text = f"{type(record.error).__name__}: {record.error}"
        elif record.prompt_tokens is not None and record.prompt_tokens != tally.input_tokens:
            text = f"prompt_tokens {record.prompt_tokens} != {tally.input_tokens} sent"
        elif record.completion_tokens != tally.output_tokens:
            text = (
                f"completion_tokens {record.completion_tokens} != {tally.output_tokens} requested"
            )
        else:
            tally.done_ns.append(now)
            return
        tally.error_ns.append((now, f"request {k}: {text}"[:_ERROR_TEXT_LIMIT]))
