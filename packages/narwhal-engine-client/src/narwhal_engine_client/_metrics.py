"""A parsed ``/metrics`` page (Prometheus text format, read with prometheus_client's parser)."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from narwhal_engine_client._errors import EngineProtocolError

CACHE_CONFIG_INFO = "vllm:cache_config_info"
PROCESS_START = "process_start_time_seconds"
#: Sample-name suffixes of one family (Prometheus and OpenMetrics text formats).
_SUFFIXES = ("_total", "_created", "_info", "_bucket", "_count", "_sum", "_gcount", "_gsum")


def _family_of(name: str) -> str:
    """``name`` without a family suffix: a sample, family or ``# TYPE`` name alike."""
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _only_families(text: str, names: Collection[str]) -> str:
    """The lines of a Prometheus page that belong to the families of ``names`` (sample or family
    names, ``_total`` and the like allowed): their ``# HELP``/``# TYPE`` lines and samples.

    A real vLLM page has hundreds of histogram lines; parsing only the few families a caller
    watches keeps a reading to a fraction of a millisecond of client CPU.
    """
    wanted = {_family_of(n) for n in names}
    prefixes = tuple(wanted)
    kept: list[str] = []
    for line in text.splitlines():
        if line.startswith("# "):
            parts = line.split(" ", 3)
            if len(parts) > 2 and parts[1] in ("HELP", "TYPE") and _family_of(parts[2]) in wanted:
                kept.append(line)
        elif line.startswith(prefixes):
            sample = line.split("{", 1)[0].split(" ", 1)[0]
            if _family_of(sample) in wanted:
                kept.append(line)
    kept.append("")
    return "\n".join(kept)


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One sample line: full name (with ``_total``, ``_bucket``... suffixes), labels, value."""

    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class MetricFamily:
    """One metric family as the parser names it (counters lose ``_total``), type and samples."""

    name: str
    type: str
    documentation: str
    samples: tuple[MetricSample, ...]


class MetricsSnapshot:
    """Every family of one ``/metrics`` page, with lookups by sample name.

    Lookups go by *sample* name, so ``vllm:prompt_tokens_total`` and ``vllm:cache_config_info`` are
    found whatever family name the page's ``# TYPE`` line gave (gauge, info, counter or untyped). A
    family name (``vllm:prompt_tokens``) also works and then means its plain, ``_total`` or
    ``_info`` samples.
    """

    __slots__ = ("_by_sample", "families", "process_start_time_seconds")

    def __init__(self, families: dict[str, MetricFamily]) -> None:
        self.families = families
        by_sample: dict[str, list[MetricSample]] = {}
        for family in families.values():
            for sample in family.samples:
                by_sample.setdefault(sample.name, []).append(sample)
        self._by_sample = by_sample
        start = self.value(PROCESS_START)
        self.process_start_time_seconds = (
            start if start is not None and math.isfinite(start) else None
        )

    @classmethod
    def from_text(cls, text: str, names: Collection[str] | None = None) -> MetricsSnapshot:
        """Parse a Prometheus text page; EngineProtocolError when it does not parse.

        With ``names``, only the families of those names are parsed (:func:`_only_families`);
        the snapshot then holds nothing else (``process_start_time_seconds`` included, unless
        named).
        """
        if names is not None:
            text = _only_families(text, names)
        families: dict[str, MetricFamily] = {}
        try:
            for fam in text_string_to_metric_families(text):
                samples = tuple(
                    MetricSample(
                        str(s.name), {str(k): str(v) for k, v in s.labels.items()}, float(s.value)
                    )
                    for s in fam.samples
                )
                name = str(fam.name)
                if name in families:  # a repeated family block: keep every sample
                    old = families[name]
                    families[name] = MetricFamily(
                        name, old.type, old.documentation, old.samples + samples
                    )
                else:
                    families[name] = MetricFamily(
                        name, str(fam.type), str(fam.documentation), samples
                    )
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise EngineProtocolError(f"GET /metrics: unparseable Prometheus text: {exc}") from exc
        return cls(families)

    def _samples(self, name: str) -> list[MetricSample]:
        found = self._by_sample.get(name)
        if found is not None:
            return found
        family = self.families.get(name)
        if family is None:
            return []
        wanted = {name, name + "_total", name + "_info"}
        return [s for s in family.samples if s.name in wanted]

    def value(self, name: str, **labels: str) -> float | None:
        """The first sample named ``name`` whose labels include ``labels``; None if none."""
        for sample in self._samples(name):
            if all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
        return None

    def sum(self, name: str) -> float | None:
        """The sum of ``name`` over all its label sets; None when the page has no such sample."""
        samples = self._samples(name)
        if not samples:
            return None
        return math.fsum(s.value for s in samples)

    def cache_config(self) -> dict[str, str] | None:
        """The labels of the first ``vllm:cache_config_info`` sample (all of them, ``engine``
        included).
        """
        samples = self._samples(CACHE_CONFIG_INFO)
        if not samples:
            return None
        return dict(samples[0].labels)

    def __repr__(self) -> str:
        return f"MetricsSnapshot({len(self.families)} families)"
