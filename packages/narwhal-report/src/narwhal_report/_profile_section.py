"""Per engine of a profile store: prefill TTFT against length (samples, fit, residuals), decode TPOT
against concurrency per context, the fit errors against the gates, the binding evidence, and a
warning where the decode fit or its delivery was suspect."""

from __future__ import annotations

import statistics
from collections import defaultdict

from narwhal_report import _svg
from narwhal_report._html import (
    Section,
    facts,
    figure,
    join,
    pct,
    slug,
    table,
    tag,
    warnings,
)
from narwhal_store import (
    BURSTY_SHARE,
    DECODE_FORM,
    DECODE_MEAN_BOUND,
    DECODE_WORST_BOUND,
    PREFILL_FORM,
    FitDoc,
    FitQuality,
    LoadedStore,
    Profile,
    ProfileSamples,
    decode_fit_suspect,
)

MEAN_GATE = DECODE_MEAN_BOUND
"""The seed's bounds: the prefill gate (abort) and the decode bounds (warn) are the same figures."""
WORST_GATE = DECODE_WORST_BOUND


def store_sections(loaded: LoadedStore, index: int) -> Section:
    """The store's section: its provenance, then one subsection per profile."""
    store = loaded.store
    head = facts(
        [
            ("store", str(loaded.path)),
            ("store SHA-256", loaded.sha256),
            ("sidecar", f"{loaded.sidecar_path} (SHA-256 {loaded.sidecar_sha256})"),
            ("generator", f"{store.generator.name} {store.generator.version}"),
            ("created", store.created_at),
            ("mode", store.mode),
            ("fleet SHA-256", store.fleet_sha256),
            ("profiles", str(len(store.profiles))),
        ]
    )
    children = [
        profile_section(loaded, profile, slug("profile", index, profile.key.engine, k))
        for k, profile in enumerate(store.profiles)
    ]
    return Section(slug("store", index), f"Profiles: {loaded.path.name}", head, children)


def _gate_row(name: str, fit: FitDoc | None, gated: bool) -> list[object]:
    if fit is None:
        return [name, "none", "", "", "", "no fit stored"]
    quality = FitQuality.of(fit)
    coefficients = ", ".join(f"{k}={v:.4g}" for k, v in fit.coefficients.items())
    if quality is None:
        return [name, fit.form, coefficients, "n/a", "n/a", "no error figures stored"]
    within = quality.mean_rel_error <= MEAN_GATE and quality.worst_rel_error <= WORST_GATE
    verdict = (
        ("within the gate" if within else "beyond the gate (abort)")
        if gated
        else ("within the bounds" if within else "beyond the bounds (suspect)")
    )
    return [
        name,
        fit.form,
        coefficients,
        f"{pct(quality.mean_rel_error)} (≤ {MEAN_GATE:.0%})",
        f"{pct(quality.worst_rel_error)} (≤ {WORST_GATE:.0%})",
        tag("span", verdict, class_="ok" if within else "bad"),
    ]


def profile_warnings(profile: Profile, samples: ProfileSamples) -> list[str]:
    """Why this profile's decode fit or delivery is suspect (empty when both look sound)."""
    out: list[str] = []
    fit = profile.decode_fit
    if fit is None:
        out.append("no decode fit: this profile cannot predict TPOT")
    else:
        quality = FitQuality.of(fit)
        why = None if quality is None else decode_fit_suspect(quality)
        if quality is not None and why is not None:
            out.append(
                f"decode fit {why} (worst at concurrency, ctx = "
                f"{', '.join(f'{v:g}' for v in quality.worst_point)}): load_trial.py check "
                "refuses it"
            )
    bursty = [
        c
        for c in samples.decode_samples
        if c.burst_share is not None and c.burst_share >= BURSTY_SHARE
    ]
    if bursty:
        where = "; ".join(
            f"input {c.input_len} x {c.concurrency}: {c.burst_share:.0%}" for c in bursty[:4]
        )
        out.append(
            f"bursty delivery in {len(bursty)} of {len(samples.decode_samples)} decode cohorts "
            f"({where}): the engine's API server flushed several steps at once"
        )
    for c in samples.decode_samples:
        if not c.valid:
            out.append(
                f"decode cohort input {c.input_len} x {c.concurrency} (repeat {c.repeat}) "
                f"invalid: {c.reason or 'no reason recorded'}"
            )
    return out


def profile_section(loaded: LoadedStore, profile: Profile, ident: str) -> Section:
    """One profile: gates, warnings, the two figures and the binding evidence."""
    samples = loaded.samples(profile.key)
    parts: list[object] = [
        tag("p", profile.key.label(), class_="sub"),
        table(
            ["fit", "form", "coefficients (s)", "mean rel. error", "worst rel. error", "verdict"],
            [
                _gate_row("prefill TTFT", profile.prefill_fit, True),
                _gate_row("decode TPOT", profile.decode_fit, False),
            ],
        ),
        warnings(profile_warnings(profile, samples)),
        figure(
            prefill_figure(profile, samples),
            "Prefill: TTFT against prompt length. Dots: every "
            "request; squares: each length's median (what the fit uses); line: the fit. Below: "
            f"each median's relative residual against the gate's {MEAN_GATE:.0%} mean and "
            f"{WORST_GATE:.0%} worst bounds.",
        ),
        figure(
            decode_figure(profile, samples),
            "Decode: TPOT against concurrency for each input "
            "length (context). Dots: each valid cohort; crosses: invalid cohorts; lines: the fit "
            "at that context.",
        ),
        tag("h4", "Binding evidence"),
        facts(_evidence_rows(profile, samples)),
    ]
    return Section(ident, f"Engine {profile.key.engine}", join(parts))


def _evidence_rows(profile: Profile, samples: ProfileSamples) -> list[tuple[str, object]]:
    e = profile.engine
    rows: list[tuple[str, object]] = [
        ("binding", f"{profile.binding.kind}: generation {profile.binding.generation}"),
        ("evidence SHA-256", profile.binding.sha256),
        (
            "engine",
            f"{e.url} · model {e.model} (root {e.root}) · max_model_len "
            f"{e.max_model_len} · vLLM {e.version}",
        ),
        ("samples SHA-256", profile.samples_sha256),
    ]
    before, after = samples.evidence.before, samples.evidence.after
    rows.append(("before = after", "yes" if before == after else "NO: the engine changed"))
    for key in sorted(before):
        value = before[key]
        if isinstance(value, str | int | float | bool) or value is None:
            rows.append((f"evidence · {key}", str(value)))
    if profile.colocation is not None:
        c = profile.colocation
        rows.append(
            (
                "colocated",
                f"neighbours {c.prefill_rps:g} prefill/s of {c.prefill_tokens} "
                f"tokens, {c.decode_rps:g} decode/s",
            )
        )
    s = samples.settings
    rows.append(
        (
            "sweep",
            f"prefill {s.prefill_lens} x {s.prefill_repeats}; decode inputs "
            f"{s.decode_input_lens} at concurrency {s.decode_concurrency}, "
            f"{s.decode_tokens} tokens",
        )
    )
    return rows


def prefill_figure(profile: Profile, samples: ProfileSamples) -> str:
    """TTFT samples, medians and fit against length, with the medians' residuals below."""
    import numpy as np

    fit = profile.prefill_fit
    fig, axes = _svg.new_figure(
        2, 1, size=(8.0, 4.2), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]}
    )
    top, bottom = axes[0][0], axes[1][0]
    lengths = [s.length for s in samples.prefill_samples]
    for s in samples.prefill_samples:
        top.scatter(
            [s.length] * len(s.ttft_s),
            [t * 1000 for t in s.ttft_s],
            s=9,
            color=_svg.SKY,
            alpha=0.6,
            linewidths=0,
            label="_nolegend_",
        )
    medians = [statistics.median(s.ttft_s) for s in samples.prefill_samples]
    top.scatter(
        lengths,
        [m * 1000 for m in medians],
        marker="s",
        s=24,
        color=_svg.INK,
        label="median",
        zorder=3,
    )
    if fit.form == PREFILL_FORM and lengths:
        grid = np.linspace(0, max(lengths) * 1.05, 120)
        top.plot(grid, [fit.ttft_s(x) * 1000 for x in grid], color=_svg.BLUE, label="fit")
        residuals = [
            (m - fit.ttft_s(n)) / m if m > 0 else 0.0 for n, m in zip(lengths, medians, strict=True)
        ]
        width = max(lengths) * 0.025
        bottom.bar(
            lengths,
            [r * 100 for r in residuals],
            width=width,
            color=[_svg.ERROR if abs(r) > WORST_GATE else _svg.BLUE for r in residuals],
        )
        for bound, style in ((MEAN_GATE, "--"), (WORST_GATE, ":")):
            for sign in (1, -1):
                bottom.axhline(sign * bound * 100, color=_svg.GREY, linestyle=style, linewidth=0.8)
        bottom.set_ylim(-60, 60)
    top.set_ylabel("TTFT (ms)")
    top.set_title(f"{profile.key.engine}: prefill TTFT")
    top.legend(loc="upper left")
    bottom.set_ylabel("residual %")
    bottom.set_xlabel("prompt length (tokens)")
    return _svg.to_svg(fig, f"{profile.key.engine} prefill TTFT against length")


def decode_figure(profile: Profile, samples: ProfileSamples) -> str:
    """TPOT of each cohort against concurrency, a colour per input length, fit lines at its ctx."""
    fit = profile.decode_fit
    fig, axes = _svg.new_figure(1, 1, size=(8.0, 3.2))
    ax = axes[0][0]
    by_input: dict[int, list[tuple[int, float, float]]] = defaultdict(list)
    invalid: list[tuple[int, int]] = []
    for c in samples.decode_samples:
        if c.valid and c.tpot_s is not None:
            by_input[c.input_len].append((c.concurrency, c.tpot_s, c.ctx or float(c.input_len)))
        elif not c.valid:
            invalid.append((c.input_len, c.concurrency))
    top_n = max([c.concurrency for c in samples.decode_samples] or [1])
    for k, input_len in enumerate(sorted(by_input)):
        colour = _svg.SERIES[k % len(_svg.SERIES)]
        points = by_input[input_len]
        ax.scatter(
            [p[0] for p in points],
            [p[1] * 1000 for p in points],
            s=22,
            color=colour,
            label=f"input {input_len}",
            zorder=3,
        )
        if fit is not None and fit.form == DECODE_FORM:
            ctx = statistics.median(p[2] for p in points)
            ns = list(range(1, top_n + 1))
            ax.plot(
                ns,
                [fit.tpot_s(n, ctx) * 1000 for n in ns],
                color=colour,
                linewidth=1.1,
                label=f"fit at ctx {ctx:.0f}",
            )
    if invalid:
        ax.scatter(
            [n for _, n in invalid],
            [0] * len(invalid),
            marker="x",
            color=_svg.ERROR,
            label="invalid cohort",
            zorder=3,
        )
    if not samples.decode_samples:
        ax.text(0.5, 0.5, "no decode samples", transform=ax.transAxes, ha="center")
    ax.set_xlabel("concurrent streams")
    _svg.integer_ticks(ax.xaxis)
    ax.set_ylabel("TPOT (ms)")
    ax.set_title(f"{profile.key.engine}: decode TPOT")
    ax.set_ylim(bottom=0)
    if by_input or invalid:
        ax.legend(loc="lower right", ncols=2)
    return _svg.to_svg(fig, f"{profile.key.engine} decode TPOT against concurrency")
