"""Evidence (docs/design.md §6): identity or verified attestation, read before and after each sweep.

A profile is bound to the evidence read before its sweep; the evidence read after must be the same
document (same generation, contract still holding), else the engine's samples are discarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from narwhal_engine_client import (
    ContractMismatchError,
    EngineClient,
    EngineClientError,
    evidence_sha256,
    gather_attestation,
    gather_identity,
)
from narwhal_profile_cli._errors import ProfileAbortError

IDENTITY_KEYS = ("url", "model", "root", "max_model_len", "version", "process_start_time_seconds")


async def read_evidence(
    iid: str, client: EngineClient, model: str, contract: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The identity (no contract) or the verified attestation of one engine.

    A contract mismatch aborts naming the key, the expected and the live value.
    """
    try:
        if contract is None:
            return await gather_identity(client, model=model)
        return await gather_attestation(client, contract, model=model)
    except ContractMismatchError as exc:
        raise ProfileAbortError(
            f"engine {iid}: engine contract mismatch on {exc.key!r}: expected {exc.expected!r}, "
            f"live {exc.live!r}",
            engine=iid,
            code="contract_mismatch",
        ) from exc
    except EngineClientError as exc:
        raise ProfileAbortError(
            f"engine {iid}: cannot read the engine's evidence: {exc}",
            engine=iid,
            code="engine_error",
        ) from exc


def generation(doc: Mapping[str, Any]) -> str:
    """The process generation: SHA-256 of the identity facts (of an identity: the whole doc)."""
    return evidence_sha256({key: doc.get(key) for key in IDENTITY_KEYS})


def check_unchanged(iid: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """Abort when the evidence changed during the sweep (a restart, or different live facts)."""
    if evidence_sha256(before) == evidence_sha256(after):
        return
    changed = sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
    details = ", ".join(f"{key} {before.get(key)!r} -> {after.get(key)!r}" for key in changed)
    restarted = "process_start_time_seconds" in changed
    what = "the engine restarted" if restarted else "the engine's live facts changed"
    raise ProfileAbortError(
        f"engine {iid}: {what} during its sweep ({details}); its samples are not bound to one "
        "generation and were discarded",
        engine=iid,
        code="generation_changed",
    )
