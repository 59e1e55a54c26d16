"""The request-field probe: before the warm-up, a short request shaped as the run's decides which
fields every request carries (``_request_fields``); measured requests are never retried.

Probe ``k`` (request id ``<warm-up id>-probe-<k>``, so the probes are counted with the warm-up
wherever the run's own requests are told apart from what came before them) sends a 16-token
prompt from the workload's pool for ``PROBE_TOKENS`` output tokens with the run's sampling rules
and counting. Accepted, its tokens must be counted exactly and number ``PROBE_TOKENS`` (a server
that ignores ``min_tokens`` or ``ignore_eos`` stops early). Refused with 400 or 422, the answer's
message is read: a sampling field or a counting field named in it is a blocking error;
``add_special_tokens`` or ``return_token_ids`` named in it is left out of the next probe and of
every request after. Any other refusal is a blocking error with the server's words.
"""

from __future__ import annotations

from typing import Final

from narwhal_engine_client import EngineClient
from narwhal_trial._errors import TrialError
from narwhal_trial.documents._request_fields import (
    COUNTING_FIELDS,
    OMITTABLE,
    SAMPLING_RULES,
    OmittedField,
    Probe,
    RequestFields,
    counting_without,
)
from narwhal_trial.run._judge import status_of
from narwhal_trial.workload._file import Workload, default_counting, prompt_ids, sampled_body

PROBE_TOKENS: Final = 4
PROBE_PROMPT_TOKENS: Final = 16
_DETAIL_CHARS = 400


def _named(message: str, fields: tuple[str, ...] | list[str]) -> list[str]:
    return [f for f in fields if f in message]


async def probe_request_fields(
    client: EngineClient, workload: Workload, warmup_id: str, *, timeout_s: float
) -> RequestFields:
    """Probe until the server accepts the run's request; TrialError when it cannot run the
    runbook's request at all (see the module docstring)."""
    base = default_counting(workload)
    prompt = prompt_ids(workload, 0)[:PROBE_PROMPT_TOKENS].tolist()
    omitted: list[str] = []
    probes: list[Probe] = []
    for k in range(len(OMITTABLE) + 1):
        request_id = f"{warmup_id}-probe-{k}"
        body = sampled_body(workload, prompt, PROBE_TOKENS, base, omitted)
        rec = await client.stream_completion(body, request_id=request_id, timeout_s=timeout_s)
        detail = None if rec.error is None else str(rec.error)[:_DETAIL_CHARS]
        accepted = rec.ok
        probes.append(
            Probe(
                request_id=request_id,
                omitted=list(omitted),
                http_status=rec.http_status,
                outcome="accepted" if accepted else "refused",
                detail=detail,
            )
        )
        where = f"{client.base_url}/v1/completions"
        if accepted:
            if rec.completion_tokens != PROBE_TOKENS or not rec.counted:
                raise TrialError(
                    f"probe {request_id} to {where} returned {rec.completion_tokens} of "
                    f"{PROBE_TOKENS} output tokens"
                    + ("" if rec.counted else ", not counted per chunk")
                    + ": the server does not honour min_tokens/ignore_eos or the usage counts "
                    "the trial needs"
                )
            return RequestFields(
                token_counting=counting_without(base, set(omitted)),
                omitted=[OmittedField(field=f, reason=OMITTABLE[f]) for f in omitted],
                probes=probes,
            )
        message = str(rec.error)
        if rec.http_status not in (400, 422):
            raise TrialError(f"probe {request_id} to {where} failed ({status_of(rec)}): {message}")
        rules = _named(message, SAMPLING_RULES)
        if rules:
            raise TrialError(
                f"{where} refuses the runbook's sampling field(s) {', '.join(rules)} "
                f"(probe {request_id}: {message}); the trial needs temperature 0, "
                "min_tokens = max_tokens and ignore_eos"
            )
        counting = _named(message, COUNTING_FIELDS)
        if counting:
            raise TrialError(
                f"{where} refuses {', '.join(counting)} (probe {request_id}: {message}); "
                "without the usage the output tokens cannot be counted"
            )
        more = [f for f in _named(message, list(OMITTABLE)) if f not in omitted]
        if not more:
            raise TrialError(f"{where} refuses the trial's request (probe {request_id}: {message})")
        omitted.extend(more)
    raise AssertionError("unreachable: every omittable field is omitted by the last probe")
