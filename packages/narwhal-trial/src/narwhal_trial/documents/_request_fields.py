"""Which request fields a run sends, decided by its probe (``_probe``) and kept in the manifest.

The runbook's request is a token-id prompt with ``temperature: 0``, ``min_tokens`` =
``max_tokens`` and ``ignore_eos``, streamed with the usage. Two further fields only help the
client and change nothing the engine does with a token-id prompt: ``add_special_tokens: false``
(vLLM adds no special tokens to a token-id prompt anyway) and ``return_token_ids`` (per-chunk
token counts, for which a cumulative usage on every chunk, ``continuous_usage_stats``, does as
well). A server that refuses those two (NVIDIA Dynamo's frontend: "Unsupported parameter(s)") gets
the request without them; one that refuses a sampling field is a blocking error.
"""

from __future__ import annotations

from typing import Final, Literal

from narwhal_store import ClosedModel

TokenCounting = Literal["token_ids", "usage", "both"]
"""``narwhal_engine_client.TokenCounting``, spelled here so that the documents (and ``predict``,
which reads them) import nothing that can contact a server; a test keeps the two equal."""

OMITTABLE: Final[dict[str, str]] = {
    "add_special_tokens": "refused by the server; no effect with a token-id prompt (vLLM adds "
    "no special tokens to one)",
    "return_token_ids": "refused by the server; each chunk's tokens are counted from the "
    "cumulative usage (stream_options.continuous_usage_stats) instead",
}
"""The fields a run may leave out, and why leaving each out changes nothing measured."""
SAMPLING_RULES: Final = ("temperature", "min_tokens", "max_tokens", "ignore_eos")
"""The runbook's sampling fields: a server that refuses one cannot run the trial."""
COUNTING_FIELDS: Final = ("continuous_usage_stats", "stream_options", "include_usage")
"""Without these the output tokens cannot be counted: refusing one is a blocking error too."""


class OmittedField(ClosedModel):
    """One field left out of every request of the run, and why that changes nothing measured."""

    field: str
    reason: str


class Probe(ClosedModel):
    """One probe request (before the warm-up; never scored) and the server's answer."""

    request_id: str
    omitted: list[str]
    http_status: int | None
    outcome: Literal["accepted", "refused"]
    detail: str | None = None


class RequestFields(ClosedModel):
    """The fields every request of the run carried: what was omitted, how tokens were counted,
    and the probes that decided it."""

    token_counting: TokenCounting
    omitted: list[OmittedField]
    probes: list[Probe]


def counting_without(counting: TokenCounting, omitted: set[str]) -> TokenCounting:
    """The per-chunk counting left once ``omitted`` fields are gone (no ``return_token_ids``:
    the usage alone)."""
    return "usage" if "return_token_ids" in omitted else counting
