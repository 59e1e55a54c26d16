"""The workload file (``workload.json``) and the deterministic per-request prompt sampler."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import numpy as np
import orjson
from pydantic import ConfigDict, Field, ValidationError

from narwhal_engine_client import TokenCounting, completion_body
from narwhal_store import ClosedModel
from narwhal_trial._errors import WorkloadError
from narwhal_trial._files import read_regular
from narwhal_trial.documents._request_fields import OMITTABLE, RequestFields, counting_without
from narwhal_trial.workload._blocks import BlockSampler
from narwhal_trial.workload._schedule import Schedule

WORKLOAD_FORMAT: Final = "narwhal.trial.workload"
SAMPLER: Final = "pool-uniform-v1"
"""Request n's prompt is ``pool[rng.integers(0, len(pool), size=input_tokens)]``,
``rng = numpy.random.default_rng(seed + n)``."""
BLOCK_SAMPLER: Final = "pool-blocks-v1"
"""A scheduled workload's: each request's own length, and equal ``hash_ids`` blocks equal
(``_blocks``)."""


TokenIdsSource = Literal["return_token_ids", "logprobs", "tokenize", "tokenizer"]
"""How prepare got the seed completion's token ids (``tokenize``: the server's ``/tokenize`` of
its text; ``tokenizer``: a local ``tokenizer.json`` applied to its text, ``--tokenizer``)."""
MaxModelLenSource = Literal["tokenize", "models", "metrics", "option"]
"""Where prepare read the context limit: ``/tokenize``, ``/v1/models``, the frontend's
``dynamo_frontend_model_context_length`` gauge, or ``--max-model-len``."""


class _FrozenDoc(ClosedModel):
    """Frozen: a workload is fixed once prepared (the manifest records its digest)."""

    model_config = ConfigDict(frozen=True)


class Sampling(_FrozenDoc):
    """The runbook's sampling settings, sent on every request of both rate tests."""

    temperature: float = 0.0
    add_special_tokens: bool = False
    min_tokens: int = Field(gt=0)
    max_tokens: int = Field(gt=0)
    ignore_eos: bool = True


class SeedPrompt(_FrozenDoc):
    """Which seed text was completed and how its token ids were returned."""

    name: str
    sha256: str
    completion_tokens: int
    token_ids_source: TokenIdsSource


class TokenizerFile(_FrozenDoc):
    """The local tokenizer that turned the seed completion's text into its token ids."""

    path: str
    sha256: str = Field(description="SHA-256 of tokenizer.json's exact bytes")


class Workload(_FrozenDoc):
    """``workload.json``: everything a run needs to rebuild each request's body exactly."""

    format: Literal["narwhal.trial.workload"] = WORKLOAD_FORMAT
    format_version: Literal[1] = 1
    model: str
    max_model_len: int = Field(gt=0)
    engine_version: str | None
    pool: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)
    input_tokens: int = Field(
        gt=0, description="every request's; a scheduled workload's longest request's (its warm-up)"
    )
    output_tokens: int = Field(gt=0)
    seed: int = Field(ge=0)
    sampler: Literal["pool-uniform-v1", "pool-blocks-v1"] = SAMPLER
    sampling: Sampling
    seed_prompt: SeedPrompt
    created: str
    served_by: str | None = Field(
        default=None,
        description="the base URL prepare asked: any engine or router serving the same model "
        "can run the workload",
    )
    max_model_len_source: MaxModelLenSource | None = Field(
        default=None, description="where max_model_len was read (absent in older workloads)"
    )
    tokenizer: TokenizerFile | None = Field(
        default=None, description="the local tokenizer, when the pool came from one"
    )
    schedule: Schedule | None = Field(
        default=None,
        description="each request's due offset and lengths (prepare --trace or --arrivals); "
        "absent in the runbook's workload, which run --rate spaces evenly",
    )

    def output_of(self, n: int) -> int:
        """Request ``n``'s output tokens (``n`` = a scheduled workload's request count: the
        warm-up, the longest request's)."""
        sched = self.schedule
        return (
            self.output_tokens if sched is None or n >= sched.requests else sched.output_tokens[n]
        )


class LoadedWorkload(_FrozenDoc):
    """A workload read from disk and the SHA-256 of its bytes (the manifest's workload digest)."""

    workload: Workload
    path: str
    sha256: str


def workload_bytes(workload: Workload) -> bytes:
    """Canonical JSON (sorted keys, compact): the file digest is the document digest."""
    # The runbook's workload has no schedule key at all: its file stays what it always was.
    dump = workload.model_dump(
        mode="json", exclude={"schedule"} if workload.schedule is None else None
    )
    return orjson.dumps(dump, option=orjson.OPT_SORT_KEYS)


def load_workload(path: Path) -> LoadedWorkload:
    """Read and validate ``workload.json``; raises WorkloadError naming the file and the problem."""
    try:
        data = read_regular(path)
    except OSError as exc:
        raise WorkloadError(f"cannot read workload {path}: {exc.strerror or exc}") from exc
    try:
        doc: Any = orjson.loads(data)
        workload = Workload.model_validate(doc)
    except orjson.JSONDecodeError as exc:
        raise WorkloadError(f"workload {path} is not JSON: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise WorkloadError(f"workload {path}: {where}: {first['msg']}") from exc
    s = workload.sampling
    if s.min_tokens != workload.output_tokens or s.max_tokens != workload.output_tokens:
        raise WorkloadError(f"workload {path}: min_tokens and max_tokens must equal output_tokens")
    problem = _schedule_problem(workload)
    if problem is not None:
        raise WorkloadError(f"workload {path}: schedule: {problem}")
    return LoadedWorkload(
        workload=workload, path=str(path), sha256=hashlib.sha256(data).hexdigest()
    )


def _schedule_problem(workload: Workload) -> str | None:
    sched = workload.schedule
    if sched is None:
        return (
            "a runbook workload's sampler is pool-uniform-v1"
            if workload.sampler != SAMPLER
            else None
        )
    if workload.sampler != BLOCK_SAMPLER:
        return f"a scheduled workload's sampler is {BLOCK_SAMPLER}, not {workload.sampler}"
    k = sched.longest()
    if (sched.input_tokens[k], sched.output_tokens[k]) != (
        workload.input_tokens,
        workload.output_tokens,
    ):
        return "input_tokens and output_tokens must be the longest request's"
    return None


def sampler_of(workload: Workload) -> BlockSampler:
    """The prompt builder of ``workload`` (one per run: it keeps the blocks it drew)."""
    block = workload.schedule.block_tokens if workload.schedule is not None else 1
    return BlockSampler(workload.pool, workload.seed, block)


def prompt_ids(workload: Workload, n: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Request ``n``'s prompt: ``input_tokens`` pool ids drawn with ``default_rng(seed + n)``
    (a scheduled workload's: ``scheduled_prompt``)."""
    if n < 0:
        raise ValueError(f"sequence must be non-negative, got {n}")
    return prompt_of(workload, n, sampler_of(workload))


def prompt_of(
    workload: Workload, n: int, sampler: BlockSampler
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Request ``n``'s prompt built by ``sampler`` (``prompt_ids``); in a scheduled workload,
    ``n`` = the request count is the warm-up: the longest request's length, with tokens no
    request shares."""
    sched = workload.schedule
    if sched is None or n >= sched.requests:
        return sampler.prompt(n, workload.input_tokens, None)
    ids = None if sched.hash_ids is None else sched.hash_ids[n]
    return sampler.prompt(n, sched.input_tokens[n], ids)


_COUNTING: dict[TokenIdsSource, TokenCounting] = {
    "return_token_ids": "token_ids",
    "logprobs": "usage",
    "tokenize": "both",
    "tokenizer": "both",
}


def request_body(
    workload: Workload,
    n: int,
    fields: RequestFields | None = None,
    sampler: BlockSampler | None = None,
) -> bytes:
    """The encoded streaming body of request ``n`` with the workload's sampling settings.

    It asks for exact per-chunk token counts the way the engine that prepared the workload gave
    its token ids: ``return_token_ids``, per-chunk usage when that engine only knew logprobs (vLLM
    before 0.10.2), and both when it gave neither (ids from ``/tokenize`` or a local tokenizer).
    The client checks that the chunks add up to the usage count. ``fields`` (the run's probe)
    overrides the counting and leaves out the fields the server refuses. A scheduled workload's
    request has its own lengths (``n`` = the request count: the warm-up, the longest shape);
    ``sampler`` keeps the blocks drawn across calls.
    """
    counting = default_counting(workload) if fields is None else fields.token_counting
    omitted = set() if fields is None else {f.field for f in fields.omitted}
    prompt = prompt_of(workload, n, sampler or sampler_of(workload))
    return sampled_body(workload, prompt.tolist(), workload.output_of(n), counting, omitted)


def default_counting(workload: Workload) -> TokenCounting:
    """How a run counts tokens per chunk before any field is omitted (see ``request_body``)."""
    return _COUNTING[workload.seed_prompt.token_ids_source]


def sampled_body(
    workload: Workload,
    prompt: list[int],
    output_tokens: int,
    counting: TokenCounting,
    omitted: Collection[str] = (),
) -> bytes:
    """A streaming body with the workload's sampling rules (``min_tokens`` = ``max_tokens`` =
    ``output_tokens``), its counting, and without the ``omitted`` fields (``OMITTABLE``)."""
    unknown = set(omitted) - set(OMITTABLE)
    if unknown:
        raise ValueError(f"cannot omit {sorted(unknown)}: only {sorted(OMITTABLE)}")
    s = workload.sampling
    return completion_body(
        token_counting=counting_without(counting, set(omitted)),
        model=workload.model,
        prompt=prompt,
        max_tokens=output_tokens,
        min_tokens=output_tokens,
        temperature=s.temperature,
        ignore_eos=s.ignore_eos,
        add_special_tokens=None if "add_special_tokens" in omitted else s.add_special_tokens,
    )
