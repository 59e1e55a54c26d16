"""For the Dynamo-mimic tests: a fleet behind ``--router-mimic dynamo``, plain HTTP calls, and
readers of SSE bodies and Prometheus pages written independently of the simulator's code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import orjson

from narwhal_sim.testing import SimFleet, sim_config, start_sim_fleet

MODEL = "tiny"
_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$")


def dynamo_fleet(
    workdir: Path, *, engine: dict[str, Any] | None = None, options: tuple[str, ...] = ()
) -> SimFleet:
    """One tiny-preset engine ``e0`` serving ``tiny`` (no jitter; ``engine`` adds sim-config
    keys) behind a router started with ``--router-mimic dynamo`` and ``options``."""
    return start_sim_fleet(
        workdir,
        [{"iid": "e0", "role": "mixed", "model": MODEL}],
        sim_config=sim_config({"preset": "tiny", "jitter": 0.0}, e0=engine or {}),
        router=True,
        router_options=["--router-mimic", "dynamo", *options],
    )


def post(url: str, body: Any, **headers: str) -> httpx.Response:
    """``POST url`` with a JSON body (bytes are sent as they are)."""
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    heads = {"content-type": "application/json", **headers}
    return httpx.post(url, content=data, headers=heads, timeout=30.0)


def completion(**fields: Any) -> dict[str, Any]:
    """A completion body for ``tiny``: 8 prompt ids, ``ignore_eos``, then ``fields``."""
    return {"model": MODEL, "prompt": list(range(300, 308)), "ignore_eos": True, **fields}


def sse_data(text: str) -> list[Any]:
    """Every ``data:`` event of an SSE body: JSON documents, and the ``[DONE]`` string."""
    events = [block for block in text.split("\n\n") if block.strip()]
    assert all(e.startswith("data: ") for e in events), events
    return [e[6:] if e[6:] == "[DONE]" else orjson.loads(e[6:]) for e in events]


def samples(url: str) -> dict[str, float]:
    """``GET url/metrics`` as ``{'name{labels}': value}`` (labels as the page writes them);
    every family must have its ``# HELP`` and ``# TYPE`` lines before its samples."""
    page = httpx.get(f"{url}/metrics", timeout=10.0)
    assert page.status_code == 200, page.text
    out: dict[str, float] = {}
    described: set[str] = set()
    for line in page.text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            described.add(line.split(" ")[2])
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in described or family in described, f"{name} has no HELP/TYPE"
        out[name + (labels or "")] = float(value)
    return out
