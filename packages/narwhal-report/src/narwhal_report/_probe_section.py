"""Per freshness probe (``narwhal-profile --verify``): when it ran, against which store, and per
engine how fast each phase runs today over its profile (the drift factor, its 5-95 % interval,
whether it drifted past the probe's threshold) with every re-measured point behind it."""

from __future__ import annotations

from pathlib import Path

from narwhal_report import _svg
from narwhal_report._html import (
    Markup,
    Section,
    badge,
    facts,
    figure,
    join,
    ms,
    slug,
    table,
    tag,
    warnings,
)
from narwhal_store import DriftFactor, EngineDrift, LoadedStore, ProbeDocument


def probe_section(
    path: Path, probe: ProbeDocument, index: int, stores: list[LoadedStore]
) -> Section:
    """The probe's section: its provenance and drift overview, then one subsection per engine."""
    drifted = probe.drifted()
    body = join(
        [
            facts(
                [
                    ("probe", str(path)),
                    ("ended", probe.created_at),
                    ("generator", f"{probe.generator.name} {probe.generator.version}"),
                    ("fleet", f"{probe.fleet} (SHA-256 {probe.fleet_sha256[:12]}…)"),
                    ("store", store_line(probe, stores)),
                    ("threshold", f"drifted when |factor - 1| > {probe.threshold:g}"),
                    (
                        "drifted",
                        ", ".join(drifted)
                        if drifted
                        else f"none of {len(probe.engines)} engine(s)",
                    ),
                ]
            ),
            warnings([drift_line(iid, probe.engines[iid], probe.threshold) for iid in drifted]),
            figure(
                drift_figure(probe),
                "Each engine's drift factor per phase (the probe's timing over its profile's at "
                "the same points; above 1: slower than profiled) with its 5-95 % interval; the "
                "shaded band is the threshold, a red point drifted past it.",
            ),
            table(
                [
                    "engine",
                    "prefill factor [5-95 %]",
                    "decode factor [5-95 %]",
                    "drifted",
                    "points",
                    "profile measured",
                    "probe took",
                ],
                [
                    [
                        iid,
                        factor_text(engine.prefill),
                        factor_text(engine.decode),
                        drifted_badge(engine.drifted),
                        str(len(engine.points)),
                        engine.profile_created_at,
                        f"{engine.seconds:.1f} s",
                    ]
                    for iid, engine in probe.engines.items()
                ],
            ),
        ]
    )
    children = [
        engine_section(iid, engine, probe.threshold, slug("probe", index, iid), index)
        for iid, engine in probe.engines.items()
    ]
    return Section(slug("probe", index), f"Freshness probe: {path.name}", body, children)


def store_line(probe: ProbeDocument, stores: list[LoadedStore]) -> str:
    """The store the probe compared with, and whether a store given is that one."""
    same = [s.path for s in stores if s.sha256 == probe.profiles_sha256]
    match = (
        f"the store given as {same[0]}"
        if same
        else "no store given here has this SHA-256"
        if stores
        else "no store given"
    )
    return f"{probe.profiles} (SHA-256 {probe.profiles_sha256[:12]}…): {match}"


def factor_text(drift: DriftFactor | None) -> str:
    """``1.032 [0.981, 1.090]``, or why there is none."""
    if drift is None:
        return "not probed"
    return f"{drift.factor:.3f} [{drift.low:.3f}, {drift.high:.3f}]"


def drifted_badge(drifted: bool) -> Markup:
    """DRIFTED in red, else WITHIN in green."""
    return badge(not drifted, "WITHIN", "DRIFTED")


def drift_line(iid: str, engine: EngineDrift, threshold: float) -> str:
    """What drifted in one engine, for the warning box."""
    parts = [
        f"{phase} {drift.factor:.3f}"
        for phase, drift in (("prefill", engine.prefill), ("decode", engine.decode))
        if drift is not None and drift.drifted
    ]
    return f"engine {iid} drifted past ±{threshold:g}: {', '.join(parts)} times its profile"


def engine_section(
    iid: str, engine: EngineDrift, threshold: float, ident: str, index: int
) -> Section:
    """One engine: each phase's drift, then every point re-measured."""
    phases = [
        [
            phase,
            "not probed" if drift is None else f"{drift.factor:.3f}",
            "" if drift is None else f"[{drift.low:.3f}, {drift.high:.3f}]",
            "" if drift is None else str(drift.repeats),
            "" if drift is None else drifted_badge(drift.drifted),
        ]
        for phase, drift in (("prefill", engine.prefill), ("decode", engine.decode))
    ]
    points = [
        [
            p.phase,
            str(p.input_len),
            str(p.concurrency),
            ", ".join(ms(v) for v in p.measured_s),
            f"{ms(p.reference_s)} ({p.reference})",
            ", ".join(f"{f:.3f}" for f in p.factors),
        ]
        for p in engine.points
    ]
    body = join(
        [
            tag(
                "p",
                f"Profile measured {engine.profile_created_at}; the probe took "
                f"{engine.seconds:.1f} s. A factor is the probe's timing over the profile's "
                f"(TTFT for prefill, the cohort's TPOT for decode); drifted past ±{threshold:g}.",
                class_="sub",
            ),
            table(["phase", "factor", "5-95 %", "repeats", "drifted"], phases),
            table(
                ["phase", "input_len", "concurrency", "measured", "reference (kind)", "factors"],
                points,
            ),
        ]
    )
    return Section(ident, f"Probe {index}, engine {iid}", body)


def drift_figure(probe: ProbeDocument) -> str:
    """Per engine and phase the factor with its interval, against the threshold's band."""
    fig, axes = _svg.new_figure(1, 1, size=(9.0, 2.8))
    ax = axes[0][0]
    ax.axhspan(1 - probe.threshold, 1 + probe.threshold, color=_svg.GOOD, alpha=0.12, linewidth=0)
    ax.axhline(1.0, color=_svg.INK, linewidth=0.8, linestyle="--")
    labels: list[str] = []
    for iid, engine in probe.engines.items():
        for phase, drift in (("prefill", engine.prefill), ("decode", engine.decode)):
            if drift is None:
                continue
            x = len(labels)
            labels.append(f"{iid}\n{phase}")
            colour = _svg.ERROR if drift.drifted else _svg.BLUE
            ax.errorbar(
                [x],
                [drift.factor],
                yerr=[[drift.factor - drift.low], [drift.high - drift.factor]],
                fmt="o",
                capsize=4,
                color=colour,
            )
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylabel("factor (today / profile)")
    return _svg.to_svg(fig, "drift factor per engine and phase")
