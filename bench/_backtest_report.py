"""The backtest's scoring half: a finished work folder read back, scored and written out.

Reads what ``_backtest`` left (``backtest.json``, each variant's ``variant.json``, each shape's
``plan.json``, prediction documents and trial folders), pairs every rate's two forecasts (with
the probe, from the profile alone) with its trial, leaves out the trials whose client fell behind
(``client_schedule_valid`` false) or that wrote no summary, and scores each variant's forecasts
with ``_forecast_scores``. Renders the markdown for docs/benchmarks.md, which ``publish`` puts
between the backtest's marker comments.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from bench._backtest import FORECASTS
from bench._forecast_scores import (
    BAND_HALF_WIDTH_MAX,
    BRIER_SHARE_MAX,
    COVERAGE_MIN,
    CROSSING_ERROR_MAX,
    MEAN_WIDTH_MAX,
    Band,
    Case,
    Forecast,
    ShapeCases,
    finite,
    pass_rate,
    score,
)
from tools.conformance import _commands as cmd
from tools.conformance._edge_claims import measured_edge

BEGIN, END = "<!-- backtest:begin -->", "<!-- backtest:end -->"


def machine() -> dict[str, Any]:
    """Cores, CPU model (``/proc/cpuinfo``) and the 1-minute load average, now."""
    cpu = "unknown"
    info = Path("/proc/cpuinfo")
    if info.is_file():
        found = re.search(r"^model name\s*:\s*(.+)$", info.read_text(), re.MULTILINE)
        cpu = found.group(1).strip() if found else cpu
    return {"cores": os.cpu_count(), "cpu": cpu, "load_average": round(os.getloadavg()[0], 2)}


def _forecast(doc: dict[str, Any]) -> dict[str, Any]:
    """One prediction document's forecast (or why there is none)."""
    if "refused" in doc:
        lines = [line for line in str(doc.get("why", "")).splitlines() if line.strip()]
        return {"refused": doc["refused"], "why": lines[-1][:160] if lines else ""}
    p = doc["prediction"]
    interval = p["attainment_interval"]
    return {
        "median": p["attainment"],
        "low": interval["low"],
        "high": interval["high"],
        "pass_probability": p["pass_probability"],
        "spread_sources": p.get("spread_sources"),
    }


def _band(doc: dict[str, Any]) -> dict[str, Any]:
    """A search document's band (empty when ``predict`` refused the search)."""
    band: dict[str, Any] = (doc.get("search") or {}).get("band") or {}
    return band


def _trial(folder: Path) -> dict[str, Any]:
    """The trial's outcome, and whether it is scored."""
    summary = folder / "summary.json"
    if not summary.is_file():
        return {"scored": False, "why": "no summary (the trial did not finish)"}
    doc = cmd.read_json(summary)
    lag = doc["schedule_misses"].get("lag", 0)
    got = {"good": doc["good"], "requests": doc["requests"], "lag_misses": lag}
    if not doc["client_schedule_valid"]:
        return {**got, "scored": False, "why": f"the client fell behind ({lag} lag misses)"}
    return {**got, "scored": True}


def shape_figures(folder: Path) -> dict[str, Any]:
    """One shape's plan, bands and rows (each rate's trial and two forecasts)."""
    plan = cmd.read_json(folder / "plan.json")
    searches = plan.get("searches", {})
    bands = {f: _band(cmd.read_json(folder / searches[f])) for f in FORECASTS if f in searches}
    curve = bands.get("probe", {}).pop("curve", [])
    for band in bands.values():
        band.pop("curve", None)
    rows = []
    for entry in plan["rates"]:
        rows.append(
            {
                "factor": entry["factor"],
                "rate": entry["rate"],
                "trial": _trial(folder / entry["trial"]),
                "forecasts": {
                    f: _forecast(cmd.read_json(folder / name))
                    for f, name in entry["predictions"].items()
                },
            }
        )
    return {
        "shape": folder.name,
        "best_pass_probability": max((p for _, p in curve), default=None),
        "ttft_s": plan.get("ttft_s"),
        "tpot_s": plan.get("tpot_s"),
        "slo_profile": plan.get("slo_profile"),
        "probe": plan.get("probe"),
        "edge": plan.get("edge"),
        "bands": bands,
        "rows": rows,
        "wall_s": plan.get("wall_s"),
    }


def _outcomes(shape: dict[str, Any]) -> tuple[tuple[float, float], ...]:
    """(rate, measured attainment) of the shape's scored trials."""
    return tuple(
        (row["rate"], row["trial"]["good"] / row["trial"]["requests"])
        for row in shape["rows"]
        if row["trial"]["scored"]
    )


def _cases(shape: dict[str, Any], forecast: str) -> ShapeCases:
    cases = []
    for row in shape["rows"]:
        trial, got = row["trial"], row["forecasts"].get(forecast, {})
        if not trial["scored"] or not got or "refused" in got:
            continue
        f = Forecast(got["median"], got["low"], got["high"], got["pass_probability"])
        cases.append(Case(row["rate"], f, trial["good"], trial["requests"]))
    b = shape["bands"].get(forecast, {})
    band = Band(b.get("pass_90"), b.get("pass_50"), b.get("pass_10"))
    return ShapeCases(shape["shape"], band, tuple(cases), _outcomes(shape))


#: The widths ``predict`` reports per source of spread (``prediction.spread_sources``).
SOURCES = ("engine_speed", "fits_bootstrap", "request_noise", "trial_sampling")


def _source_widths(shapes: list[dict[str, Any]], forecast: str) -> dict[str, float] | None:
    """Each source's mean width over the forecast's scored rates that report the sources."""
    found = [
        got["spread_sources"]
        for s in shapes
        for row in s["rows"]
        if row["trial"]["scored"]
        and (got := row["forecasts"].get(forecast, {})).get("spread_sources")
    ]
    if not found:
        return None
    return {k: sum(float(f[k]) for f in found) / len(found) for k in SOURCES}


def variant_figures(folder: Path, target: float) -> dict[str, Any]:
    """One variant's shapes and its scores per forecast."""
    meta = cmd.read_json(folder / "variant.json")
    shapes = [
        shape_figures(folder / name)
        for name in meta["shapes"]
        if (folder / name / "plan.json").is_file()
    ]
    outcomes = [a for s in shapes for _, a in _outcomes(s)]
    base = pass_rate(outcomes, target)
    scores = {
        forecast: {
            **score([_cases(s, forecast) for s in shapes], target, base).figures(),
            "source_widths": _source_widths(shapes, forecast),
        }
        for forecast in FORECASTS
    }
    for shape in shapes:
        low, high = measured_edge(_outcomes(shape), target)
        shape["measured_bracket"] = [low, finite(high)]
    left_out = [
        {"shape": s["shape"], "rate": row["rate"], "why": row["trial"]["why"]}
        for s in shapes
        for row in s["rows"]
        if not row["trial"]["scored"]
    ]
    refused = [
        {"shape": s["shape"], "rate": row["rate"], "forecast": f, "why": got["why"]}
        for s in shapes
        for row in s["rows"]
        for f, got in row["forecasts"].items()
        if "refused" in got
    ]
    return {
        "variant": meta["variant"],
        "about": meta.get("about"),
        "profile": meta.get("profile"),
        "wall_s": meta.get("wall_s"),
        "shapes": shapes,
        "trials": len(outcomes),
        "pass_rate": base,
        "left_out": left_out,
        "refused": refused,
        "scores": scores,
    }


def backtest_figures(work: Path) -> dict[str, Any]:
    """Every variant of a work folder, scored."""
    meta = cmd.read_json(work / "backtest.json")
    target = float(meta["attainment"])
    variants = [
        variant_figures(work / name, target)
        for name in meta["variants"]
        if (work / name / "variant.json").is_file()
    ]
    return {**meta, "work": str(work), "variants": variants}


def _f(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}%}"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _mark(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not judged"}[met]


def markdown(figures: dict[str, Any]) -> str:
    """The tables and lines docs/benchmarks.md shows (between the markers)."""
    m = figures["machine"]
    started = figures["started_at"]
    ended = figures["ended_at"][11:16] if figures.get("ended_at") else "unfinished"
    took = figures.get("wall_s")
    end_load = (figures.get("machine_end") or {}).get("load_average", "n/a")
    lines = [
        f"Run of {started[:10]} ({started[11:16]}-{ended} UTC, "
        f"{'n/a' if took is None else f'{took / 60:.0f} min'}"
        f"{', quick' if figures.get('quick') else ''}), {m['cores']} cores ({m['cpu']}), "
        f"load average {m['load_average']} at the start, {end_load} at the end; "
        f"{figures['requests']} requests a trial, attainment {figures['attainment']}, rates "
        f"{', '.join(f'{f:g}' for f in figures['factors'])} times the edge.",
        "",
        "| variant | forecast | trials scored | Brier (baseline) | coverage, Wilson / strict | "
        "mean width | abs error, mean / worst | 0.5 crossing error | band half-width |",
        "| --- | --- | ---: | --- | --- | ---: | --- | ---: | ---: |",
    ]
    for v in figures["variants"]:
        for forecast in FORECASTS:
            s = v["scores"][forecast]
            lines.append(
                f"| {v['variant']} | {'with the probe' if forecast == 'probe' else 'profile only'}"
                f" | {s['cases']} of {v['trials'] + len(v['left_out'])} | {_f(s['brier'])} "
                f"({_f(s['baseline_brier'])}) | {_pct(s['coverage'])} / "
                f"{_pct(s['strict_coverage'])} | {_f(s['mean_width'], 2)} | "
                f"{_f(s['mean_abs_error'])} / {_f(s['worst_abs_error'])} | "
                f"{_pct(s['crossing_error'], 1)} | {_pct(s['band_half_width'], 1)} |"
            )
    lines += [
        "",
        "| variant | shape | SLO TTFT / TPOT (ms) | probe prefill / decode | band 0.9 / 0.5 / 0.1, "
        "with the probe (req/s) | 0.5 crossing, profile only | measured bracket |",
        "| --- | --- | --- | --- | --- | ---: | --- |",
    ]
    for v in figures["variants"]:
        for s in v["shapes"]:
            probe, band = s.get("probe") or {}, s["bands"].get("probe", {})
            low, high = s["measured_bracket"]
            scored = any(row["trial"]["scored"] for row in s["rows"])
            bracket = f"{_rate(low)} to {'∞' if high is None else _rate(high)}"
            bracket = bracket if scored else "no trials"
            slo = (
                f"{float(s['ttft_s']) * 1e3:.1f} / {float(s['tpot_s']) * 1e3:.2f}"
                if s.get("ttft_s")
                else "n/a"
            )
            lines.append(
                f"| {v['variant']} | {s['shape']} | {slo} | x{_f(probe.get('prefill'))} / "
                f"x{_f(probe.get('decode'))} | {_rate(band.get('pass_90'))} / "
                f"{_rate(band.get('pass_50'))} / {_rate(band.get('pass_10'))} | "
                f"{_rate(s['bands'].get('profile', {}).get('pass_50'))} | "
                f"{bracket} |"
            )
    lines.append("")
    for v in figures["variants"]:
        for s in v["shapes"]:
            if s["edge"] is None:
                lines.append(
                    f"- **{v['variant']} {s['shape']}**: no predicted edge (pass probability "
                    f"{_f(s['best_pass_probability'], 2)} at best, with the probe), no trials."
                )
    for variant, why in figures.get("failed", {}).items():
        lines.append(f"- **{variant}**: did not finish ({why.splitlines()[0]}).")
    for v in figures["variants"]:
        s = v["scores"]["probe"]
        t = s["targets"]
        lines.append(
            f"- **{v['variant']}, with the probe**: coverage {_pct(s['coverage'])} ≥ "
            f"{COVERAGE_MIN:.0%} {_mark(t['coverage'])}; mean width {_f(s['mean_width'], 2)} ≤ "
            f"{MEAN_WIDTH_MAX} {_mark(t['mean_width'])}; band half-width "
            f"{_pct(s['band_half_width'], 1)} ≤ {BAND_HALF_WIDTH_MAX:.0%} "
            f"{_mark(t['band_half_width'])}; Brier {_f(s['brier'])} < {BRIER_SHARE_MAX} x "
            f"{_f(s['baseline_brier'])} {_mark(t['brier'])}; 0.5 crossing error "
            f"{_pct(s['crossing_error'], 1)} ≤ {CROSSING_ERROR_MAX:.0%} "
            f"{_mark(t['crossing_error'])}"
            + ("." if v["variant"].startswith("vllm") else " (held against vLLM; for comparison).")
        )
        widths = {f: v["scores"][f]["source_widths"] for f in FORECASTS}
        if all(widths.values()):
            lines.append(
                "  Mean width by source of spread, with the probe / profile only: "
                + ", ".join(
                    f"{k.replace('_', ' ')} {_f(widths['probe'][k], 2)} / "
                    f"{_f(widths['profile'][k], 2)}"
                    for k in SOURCES
                )
                + "."
            )
        for out in v["left_out"]:
            lines.append(f"  Left out: {out['shape']} at {out['rate']:g}/s, {out['why']}.")
        for r in v["refused"]:
            lines.append(
                f"  Not predicted ({r['forecast']}): {r['shape']} at {r['rate']:g}/s: {r['why']}"
            )
    return "\n".join(lines)


def publish(docs: Path, text: str) -> None:
    """Replace what stands between the backtest's markers in ``docs`` with ``text``."""
    page = docs.read_text(encoding="utf-8")
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{docs}: no {BEGIN} ... {END} markers to write between")
    page = page[: start + len(BEGIN)] + "\n" + text + "\n" + page[end:]
    docs.write_text(page, encoding="utf-8")
