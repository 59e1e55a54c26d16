"""The accepted profile of an engine and whether a trial's shape lies inside its domain.

Shared by ``check`` (its profile-domain items) and ``predict`` (what it refuses to extrapolate
beyond), so this module contacts nothing and imports nothing that could: the store's documents
only.

The accepted profile is the store's profile whose key matches the engine's current fleet key.
Prefill targets (``prefill``/``mixed``) need ``input_tokens`` within the prefill fit's
``[min_len, max_len]``; decode targets (``decode``/``mixed``) need ``input_tokens`` within the
decode fit's ``input_lens`` range, or, without ``input_lens``, the mean decode context
``input + output/2`` within ``[ctx_min, ctx_max]``, and a decode fit within 20% mean and 50%
worst-point relative error (the bounds the profiler warns at).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from narwhal_store import (
    DECODE_MEAN_BOUND,
    DECODE_WORST_BOUND,
    DecodeFitDoc,
    FitQuality,
    LoadedFleet,
    LoadedStore,
    Profile,
    decode_fit_suspect,
    profile_key,
)


@dataclass(frozen=True, slots=True)
class CheckItem:
    """One check: what was checked, whether it passed, and the detail."""

    subject: str
    what: str
    ok: bool
    detail: str


def accepted_profile(store: LoadedStore, fleet: LoadedFleet, iid: str) -> Profile | str:
    """The store's profile for the engine's current fleet key, or why there is none."""
    key = profile_key(fleet, iid)
    found = [p for p in store.store.find(iid) if p.key.ident() == key.ident()]
    return found[0] if found else f"none for {key.label()}"


def domain_items(iid: str, role: str, profile: Profile, n_in: int, n_out: int) -> list[CheckItem]:
    """The profile-domain checks of one engine's accepted profile for an ``n_in``/``n_out``
    shape (also what ``predict`` refuses to extrapolate beyond)."""
    items: list[CheckItem] = []
    if role in ("prefill", "mixed"):
        dom = profile.prefill_fit.domain
        lo, hi = dom.get("min_len"), dom.get("max_len")
        ok = isinstance(lo, int) and isinstance(hi, int) and lo <= n_in <= hi
        items.append(
            CheckItem(iid, "prefill domain", ok, f"input {n_in} tokens, profile [{lo}, {hi}]")
        )
    if role in ("decode", "mixed"):
        fit = profile.decode_fit
        if fit is None:
            items.append(CheckItem(iid, "decode domain", False, "the profile has no decode fit"))
            return items
        items.append(_decode_item(iid, fit.domain, n_in, n_out))
        items.append(_decode_quality_item(iid, fit))
    return items


def _decode_quality_item(iid: str, fit: DecodeFitDoc) -> CheckItem:
    """The decode fit must be within ``DECODE_MEAN_BOUND`` / ``DECODE_WORST_BOUND``, so that a fit
    the profiler warned about never silently feeds a trial."""
    what = "decode fit quality"
    quality = FitQuality.of(fit)
    if quality is None:
        return CheckItem(iid, what, False, "the decode fit records no relative errors")
    figures = (
        f"mean relative error {quality.mean_rel_error:.1%}, worst {quality.worst_rel_error:.1%} "
        f"at (concurrency, ctx) {list(quality.worst_point)}; bounds {DECODE_MEAN_BOUND:.0%} / "
        f"{DECODE_WORST_BOUND:.0%}"
    )
    why = decode_fit_suspect(quality)
    if why is not None:
        return CheckItem(iid, what, False, f"{figures}: {why}; re-profile this engine")
    return CheckItem(iid, what, True, figures)


def _decode_item(iid: str, dom: dict[str, Any], n_in: int, n_out: int) -> CheckItem:
    lens = dom.get("input_lens")
    if isinstance(lens, list) and lens:
        ok = min(lens) <= n_in <= max(lens)
        return CheckItem(
            iid, "decode domain", ok, f"input {n_in} tokens, profile input lengths {lens}"
        )
    lo, hi = dom.get("ctx_min"), dom.get("ctx_max")
    ctx = n_in + n_out / 2
    ok = isinstance(lo, int | float) and isinstance(hi, int | float) and lo <= ctx <= hi
    return CheckItem(iid, "decode domain", ok, f"mean context {ctx:g}, profile [{lo}, {hi}]")


def lengths_hint(whats: set[str]) -> str:
    """What to profile for the domain checks that failed (their ``what``), or ``""``."""
    options = [
        option
        for what, option in (
            ("prefill domain", "--prefill-lens"),
            ("decode domain", "--decode-input-lens"),
        )
        if what in whats
    ]
    if not options:
        return ""
    return f": profile those lengths (narwhal-profile {' and '.join(options)} covering them)"
