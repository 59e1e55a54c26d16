"""``--merge A --merge B [...] --out C``: combine separately measured role mixes into one store.

Each input is checked profile by profile first (``_refit_inputs.verified_input``: sidecar present
and matching the store's SHA-256, samples digest, evidence, raw timings), so every refusal names
the input and the profile at fault; ``narwhal_store.merge_stores`` then refuses duplicated keys
(engine, GPU group, role split, target role), engines outside the fleet and fleet engines no input
covers, and records each source store and sidecar with its SHA-256 in the merged sidecar.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_profile_cli.results._assemble import generator
from narwhal_profile_cli.results._refit_inputs import (
    check_fresh_out,
    check_membership,
    verified_input,
    write_fresh_out,
)
from narwhal_store import LoadedFleet, StoreError, WrittenStore, merge_stores

_CODE = "merge_input"


def merge_into(fleet: LoadedFleet, inputs: Sequence[Path], out: Path) -> WrittenStore:
    """Merge ``inputs`` (≥ 2 stores with their sidecars) into a fresh store + sidecar at ``out``.

    Every refusal is a usage error (exit 2): fewer than two inputs, an existing or symlinked
    ``--out``, an input whose sidecar is missing or altered, a profile without samples or intact
    evidence, a key in two inputs, an engine outside the fleet, a fleet engine no input covers.
    """
    if len(inputs) < 2:
        raise ProfileUsageError(
            f"--merge needs at least two input stores (got {len(inputs)})", code=_CODE
        )
    check_fresh_out(out)
    for raw in inputs:
        path = Path(raw)
        what = f"--merge input {path}"
        loaded = verified_input(path, what=what, code=_CODE)
        check_membership(fleet, loaded, what=what, code=_CODE)
    try:
        store, sidecar = merge_stores([Path(p) for p in inputs], fleet, generator=generator())
    except StoreError as exc:  # MergeError, or an input that changed since it was checked
        raise ProfileUsageError(f"--merge: {exc}", code=_CODE) from exc
    return write_fresh_out(out, store, sidecar)
