"""The benchmark's rows and the shape every client is asked to send."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Row:
    """One offered load: constant rate, request count, prompt and output lengths, server pace."""

    name: str
    rate: float
    requests: int
    input_tokens: int
    output_tokens: int
    ttft_ms: float
    token_ms: float

    @property
    def label(self) -> str:
        """The row as the issue's table writes it."""
        return (
            f"{self.rate:g} req/s x {self.requests}, {self.input_tokens} in / "
            f"{self.output_tokens} out, {self.token_ms:g} ms/token"
        )


TTFT_MS = 10.0
"""The counterpart's first-token delay after a request's body is in (not fixed by the issue)."""

ROWS: tuple[Row, ...] = (
    Row("r50", 50.0, 1000, 512, 128, TTFT_MS, 5.0),
    Row("r200", 200.0, 2000, 512, 32, TTFT_MS, 5.0),
    Row("r500", 500.0, 3000, 512, 16, TTFT_MS, 5.0),
)

QUICK_REQUESTS = {"r50": 100, "r200": 200, "r500": 300}
"""``--quick`` keeps each rate and shape but sends this many requests (a few seconds a row)."""


def select_rows(names: list[str] | None, *, quick: bool) -> list[Row]:
    """The rows named (all when None), shortened with ``--quick``; ValueError for an unknown
    name."""
    known = {row.name: row for row in ROWS}
    chosen = names if names else [row.name for row in ROWS]
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise ValueError(f"unknown row(s) {', '.join(unknown)}; known: {', '.join(known)}")
    rows = [known[n] for n in chosen]
    if quick:
        rows = [replace(r, requests=QUICK_REQUESTS[r.name]) for r in rows]
    return rows
