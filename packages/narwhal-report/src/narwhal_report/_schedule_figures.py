"""A scheduled workload's figures, drawn from ``summary.json`` ``schedule`` alone: the offered load
over time (requests and tokens per second), the input and output lengths' histograms, and the
attainment of each input-length bucket with its Wilson interval against the target."""

from __future__ import annotations

from typing import Any

from narwhal_report import _svg
from narwhal_trial import Histogram, LengthBucket, ScheduleView


def tokens(n: int) -> str:
    """A token count short: ``512``, ``1k`` (1024), ``1.5k``, ``32k``."""
    return f"{n / 1024:g}k" if n >= 1024 else str(n)


def bucket_label(low: int, high: int) -> str:
    """A length bucket ``[low, high)`` as ``1-511``, ``512-1023``, ``1k-2k`` (its upper edge
    excluded, written as the next bucket's start when both are in thousands)."""
    if low >= 1024:
        return f"{tokens(low)}-{tokens(high)}"
    return f"{low}-{high - 1}"


def offered_figure(view: ScheduleView, name: str) -> str:
    """Requests per second (top) and prompt and output tokens per second stacked (below) falling
    due in each ``offered.bin_s`` bin, the span's means dashed."""
    import numpy as np

    o = view.offered
    fig, axes = _svg.new_figure(
        2, 1, size=(9.0, 4.4), sharex=True, gridspec_kw={"height_ratios": [1, 1.2]}
    )
    rate_ax, token_ax = axes[0][0], axes[1][0]
    edges = np.arange(len(o.requests) + 1) * o.bin_s
    rate = np.asarray(o.requests, dtype=float) / o.bin_s
    rate_ax.stairs(rate, edges, fill=True, color=_svg.SKY, linewidth=0, label="requests/s due")
    rate_ax.axhline(view.mean_rate, color=_svg.INK, linestyle="--",
                    label=f"mean {view.mean_rate:.3g}/s")  # fmt: skip
    rate_ax.set_ylabel("requests/s")
    rate_ax.set_ylim(0, max(float(rate.max()), view.mean_rate, 1e-9) * 1.3)
    rate_ax.legend(loc="upper right", ncols=2, fontsize=7)
    rate_ax.set_title(
        f"{name}: offered load ({view.source}, speedup {view.speedup:g}x), per {o.bin_s:g} s"
    )
    prompt = np.asarray(o.input_tokens, dtype=float) / o.bin_s
    output = np.asarray(o.output_tokens, dtype=float) / o.bin_s
    token_ax.stairs(prompt, edges, fill=True, color=_svg.BLUE, linewidth=0, label="prompt")
    token_ax.stairs(prompt + output, edges, baseline=prompt, fill=True, color=_svg.SLOW,
                    linewidth=0, label="output")  # fmt: skip
    token_ax.axhline(view.offered_token_rate, color=_svg.INK, linestyle="--",
                     label=f"mean {view.offered_token_rate:,.0f} tokens/s")  # fmt: skip
    token_ax.set_ylabel("tokens/s")
    token_ax.set_ylim(0, max(float((prompt + output).max()), 1e-9) * 1.3)
    token_ax.set_xlabel("due time since t0 (s)")
    token_ax.legend(loc="upper right", ncols=3, fontsize=7)
    return _svg.to_svg(fig, f"offered load over time of {name}")


def _histogram(ax: Any, h: Histogram, colour: str, title: str) -> None:
    labels = [bucket_label(lo, hi) for lo, hi in zip(h.edges, h.edges[1:], strict=False)]
    bars = ax.bar(range(len(h.counts)), h.counts, color=colour, width=0.8)
    ax.bar_label(bars, fontsize=7)
    ax.set_xticks(range(len(h.counts)), labels, rotation=30, ha="right")
    ax.set_xlabel("tokens")
    ax.set_ylim(0, max(max(h.counts, default=0), 1) * 1.15)
    ax.set_title(f"{title} ({sum(h.counts)})")
    ax.grid(axis="x", visible=False)
    _svg.integer_ticks(ax.yaxis)


def lengths_figure(view: ScheduleView, name: str) -> str:
    """The input and the output lengths' histograms side by side (power-of-two buckets)."""
    fig, axes = _svg.new_figure(1, 2, size=(9.0, 3.0))
    _histogram(axes[0][0], view.input_lengths, _svg.BLUE, "input lengths")
    _histogram(axes[0][1], view.output_lengths, _svg.SLOW, "output lengths")
    axes[0][0].set_ylabel("requests")
    return _svg.to_svg(fig, f"input and output lengths of {name}")


def buckets_figure(buckets: list[LengthBucket], target: float, name: str) -> str:
    """Each input-length bucket's attainment with its 95% Wilson interval (green at or above the
    target, red below), its requests written under it, the target dashed."""
    fig, axes = _svg.new_figure(1, 1, size=(9.0, 2.8))
    ax = axes[0][0]
    for k, b in enumerate(buckets):
        colour = _svg.GOOD if b.attainment >= target else _svg.ERROR
        error = [[b.attainment - b.interval.low], [b.interval.high - b.attainment]]
        ax.errorbar([k], [b.attainment], yerr=error, fmt="o", color=colour, capsize=4)
        ax.annotate(f"{b.good}/{b.requests}", (k, b.interval.low), textcoords="offset points",
                    xytext=(0, -11), ha="center", fontsize=7)  # fmt: skip
    ax.axhline(target, color=_svg.INK, linestyle="--", label=f"target {target:g}")
    labels = [bucket_label(b.low, b.high) for b in buckets]
    ax.set_xticks(range(len(buckets)), labels)
    ax.set_xlim(-0.6, len(buckets) - 0.4)
    ax.set_ylim(-0.12, 1.05)
    ax.set_xlabel("input length (tokens)")
    ax.set_ylabel("good / requests")
    ax.set_title(f"{name}: attainment per input-length bucket")
    ax.legend(loc="lower left", fontsize=7)
    return _svg.to_svg(fig, f"attainment per input-length bucket of {name}")


__all__ = ["bucket_label", "buckets_figure", "lengths_figure", "offered_figure", "tokens"]
