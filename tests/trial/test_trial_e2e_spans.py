"""``run --otlp-receiver`` against simulated engines that export vLLM's spans: every request
joined to its span, the split fleet's two halves, and spans the server never sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from narwhal_sim.testing import SimFleet, free_port, start_sim_fleet
from narwhal_trial import RequestRecord, Summary

from .conftest import NO_JITTER, Cli, prepare_workload, read_run, run_args

pytestmark = pytest.mark.slow


def _config(port: int) -> dict[str, Any]:
    defaults = NO_JITTER["defaults"] | {
        "otlp_traces_endpoint": f"http://127.0.0.1:{port}/v1/traces/{{iid}}",
        "otlp_export_interval_s": 0.2,
    }
    return NO_JITTER | {"defaults": defaults}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimFleet, int, Path]]:
    """A split pair (prefill p0, decode d0) and a mixed engine m0 behind the router, exporting
    their spans to 127.0.0.1:PORT; and a workload."""
    port = free_port()
    root = tmp_path_factory.mktemp("traced")
    engines = [{"iid": "p0", "role": "prefill"}, {"iid": "d0", "role": "decode"},
               {"iid": "m0", "role": "mixed"}]  # fmt: skip
    with start_sim_fleet(root / "fleet", engines, sim_config=_config(port), router=True,
                         preset="tiny") as fleet:  # fmt: skip
        workload = prepare_workload(str(fleet.router_url), root)
        yield fleet, port, workload


def _run(cli: Cli, traced: tuple[SimFleet, int, Path], out: Path, requests: int) -> Any:
    fleet, port, workload = traced
    args = run_args(str(fleet.router_url), workload, out, requests=requests, attainment=0.5)
    return cli(*args, "--fleet", str(fleet.fleet_path), "--otlp-receiver", f"127.0.0.1:{port}")


def test_every_request_joined_to_its_spans(
    cli: Cli, traced: tuple[SimFleet, int, Path], tmp_path: Path
) -> None:
    """Each completed record carries the engines' timings: split requests two spans (prefill
    half on p0), whole ones one; the client's TTFT is at least the server's."""
    out = tmp_path / "run"
    proc = _run(cli, traced, out, 12)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, raw, doc = read_run(out)
    records = [RequestRecord.model_validate(r) for r in raw]
    summary = Summary.model_validate(doc)
    assert summary.server is not None and summary.server.spans is not None
    spans = summary.server.spans
    assert (spans.client_completed, spans.matched, spans.client_only, spans.server_only) == (
        12, 12, 0, 0)  # fmt: skip
    assert spans.warmup_spans >= 1 and spans.negative == 0
    by_engine = {r.server.engine for r in records if r.server is not None}
    assert by_engine <= {"d0", "m0"} and sum(spans.by_engine.values()) == 12
    for r in records:
        assert r.server is not None and r.ttft_s is not None
        assert r.ttft_s >= r.server.ttft_s
        if r.server.engine == "d0":  # the router split it: prefilled on p0 first
            assert (r.server.prefill_engine, r.server.spans) == ("p0", 2)
        else:
            assert (r.server.prefill_engine, r.server.spans) == (None, 1)
    fleet = summary.server.fleet
    assert fleet.server_completed == 12 and fleet.ttft_method == "prefill e2e + serving ttft"
    assert fleet.prefill_completed == spans.by_engine.get("d0", 0)
    # the histograms' exact mean and the spans' per-request values tell the same story
    assert fleet.ttft is not None
    mean_added = sum(r.server.client_added_ttft_s for r in records if r.server) / 12
    assert fleet.ttft.added_mean_s == pytest.approx(mean_added, abs=1e-6)
    lines = (out / "spans.jsonl").read_bytes().splitlines()
    assert {orjson.loads(x)["engine"] for x in lines} <= {"p0", "d0", "m0"}
    assert "spans: 12 of 12 completed requests matched" in proc.stdout
    assert orjson.loads((out / "server.json").read_bytes())["receiver"]["rejected"] == 0


def test_requests_without_spans_are_named_and_the_run_stands(
    cli: Cli, traced: tuple[SimFleet, int, Path], tmp_path: Path
) -> None:
    """The serving engines export no span (engines not told to trace; the prefill engine still
    does): every record is client-only and named, the run waits no longer than --otlp-wait,
    and the verdict is unchanged (exit 0)."""
    fleet, port, workload = traced
    for iid in ("d0", "m0"):
        fleet.set_faults(iid, span_drop_every=1)
    try:
        out = tmp_path / "run"
        args = run_args(str(fleet.router_url), workload, out, requests=8, attainment=0.5)
        proc = cli(*args, "--fleet", str(fleet.fleet_path), "--otlp-receiver",
                   f"127.0.0.1:{port}", "--otlp-wait", "2")  # fmt: skip
    finally:
        for iid in ("d0", "m0"):
            fleet.set_faults(iid, span_drop_every=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = Summary.model_validate(read_run(out)[2])
    assert summary.server is not None and summary.server.spans is not None
    spans = summary.server.spans
    assert (spans.matched, spans.client_only, spans.server_only) == (0, 8, 0)
    assert sorted(spans.client_only_ids) == sorted(r["request_id"] for r in read_run(out)[1])
    assert any("8 completed requests have no server span" in w for w in summary.server.warnings)
    receiver = orjson.loads((out / "server.json").read_bytes())["receiver"]
    assert 2.0 <= receiver["waited_s"] < 15.0  # --otlp-wait 2, not the default 15 s
    assert summary.server.fleet.server_completed == 8  # the pages still count them
