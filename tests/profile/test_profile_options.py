"""Option parsing, validation and mode selection: bad values and conflicts exit 2."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from narwhal_profile_cli._errors import ProfileUsageError
from narwhal_profile_cli._modes import select_mode
from narwhal_profile_cli._options import (
    RawOptions,
    parse_int_list,
    parse_positive_int,
    parse_rate,
    validate,
)
from narwhal_profile_cli.cli import run


@pytest.fixture
def fleet_file(tmp_path: Path) -> Path:
    """A valid fleet whose engine cannot be reached (so nothing may get past validation)."""
    path = tmp_path / "fleet.json"
    path.write_bytes(
        orjson.dumps(
            {
                "format": "narwhal.fleet",
                "format_version": 1,
                "profiles": {"path": "profiles/p.json"},
                "engines": [
                    {
                        "iid": "e0",
                        "url": "http://127.0.0.1:9",
                        "role": "prefill",
                        "shared_device": {"group": "g"},
                    },
                    {
                        "iid": "e1",
                        "url": "http://127.0.0.1:9",
                        "role": "decode",
                        "shared_device": {"group": "g"},
                    },
                ],
            }
        )
    )
    return path


def test_lists_parse_to_sorted_distinct_values() -> None:
    """A list keeps its distinct values in ascending order, tolerating spaces and duplicates."""
    assert parse_int_list("--x", " 512, 256,512 ,1024", min_distinct=3) == (256, 512, 1024)


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("", "empty"),
        ("256,,512,1024", "empty item"),
        ("256,512,", "empty item"),
        ("256,abc,1024", "'abc'"),
        ("256,nan,1024", "not finite"),
        ("256,inf,1024", "not finite"),
        ("256,0,1024", "not positive"),
        ("256,-5,1024", "'-5'"),
        ("256,2.5,1024", "'2.5'"),
        ("256,256,512", "2 distinct"),
    ],
)
def test_bad_lists_name_option_and_value(raw: str, needle: str) -> None:
    """Each bad list is refused with a message naming the option and the value."""
    with pytest.raises(ProfileUsageError) as caught:
        parse_int_list("--prefill-lens", raw, min_distinct=3)
    assert caught.value.message.startswith("--prefill-lens: ")
    assert needle in caught.value.message
    assert caught.value.exit_code == 2


def test_scalars() -> None:
    """Token counts are positive integers with minimums; rates are finite and positive."""
    assert parse_positive_int("--decode-tokens", "3", minimum=3) == 3
    assert parse_rate("--neighbour-prefill-rps", "0.25") == 0.25
    for raw in ("2", "0", "-1", "x", "1e3", "inf"):
        with pytest.raises(ProfileUsageError, match="--decode-tokens"):
            parse_positive_int("--decode-tokens", raw, minimum=3)
    for raw in ("0", "-0.5", "nan", "inf", "-inf", "fast"):
        with pytest.raises(ProfileUsageError, match="--neighbour-prefill-rps"):
            parse_rate("--neighbour-prefill-rps", raw)


def test_defaults_are_the_references() -> None:
    """Without options the sweep uses the reference's defaults."""
    sweep = validate(RawOptions(fleet="f.json")).sweep
    assert sweep.prefill_lens == (256, 512, 1024, 2048, 4096, 8192, 12288, 16384)
    assert sweep.decode_input_lens == (512, 4096, 8192)
    assert sweep.decode_concurrency == (1, 4, 16, 48)
    assert (sweep.decode_tokens, sweep.prefill_repeats, sweep.decode_repeats) == (64, 3, 1)


@pytest.mark.parametrize(
    ("raw", "mode"),
    [
        (RawOptions(fleet="f"), "live"),
        (RawOptions(fleet="f", only=("a",), overwrite=True), "live"),
        (RawOptions(fleet="f", refit_samples="s.json", out="o.json"), "refit"),
        (RawOptions(fleet="f", merge=("a.json", "b.json"), out="o.json"), "merge"),
    ],
)
def test_mode_selection(raw: RawOptions, mode: str) -> None:
    """The mode follows from --refit-samples / --merge."""
    assert select_mode(validate(raw)).mode == mode


NEIGHBOURS = {
    "neighbour_prefill_rps": "0.5",
    "neighbour_decode_rps": "0.25",
    "neighbour_prefill_tokens": "512",
    "neighbour_decode_input_tokens": "128",
    "neighbour_decode_output_tokens": "32",
}


def test_colocated_with_all_five_neighbour_options() -> None:
    """--colocated with the five neighbour options selects a colocated live sweep."""
    plan = select_mode(validate(RawOptions(fleet="f", colocated=True, **NEIGHBOURS)))
    assert plan.mode == "live"
    assert plan.colocation is not None
    assert plan.colocation.decode_output_tokens == 32


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "--fleet PATH is required"),
        (["--prefill-lens", "256,512"], "--prefill-lens"),
        (["--prefill-lens", "256,x,1024"], "--prefill-lens"),
        (["--decode-input-lens", "512"], "--decode-input-lens"),
        (["--decode-input-lens", "512,-1"], "--decode-input-lens"),
        (["--decode-concurrency", "1,inf"], "--decode-concurrency"),
        (["--decode-concurrency", "4,4"], "--decode-concurrency"),
        (["--decode-tokens", "2"], "--decode-tokens: 2 is below the minimum of 3"),
        (["--decode-tokens", "nan"], "--decode-tokens"),
        (["--prefill-repeats", "2"], "--prefill-repeats: 2 is below the minimum of 3"),
        (["--decode-repeats", "0"], "--decode-repeats"),
        (["--neighbour-prefill-rps", "0"], "--neighbour-prefill-rps"),
        (["--neighbour-decode-rps", "nan"], "--neighbour-decode-rps"),
        (["--neighbour-prefill-tokens", "1.5"], "--neighbour-prefill-tokens"),
        (["--neighbour-decode-input-tokens", "0"], "--neighbour-decode-input-tokens"),
        (["--neighbour-decode-output-tokens", "-3"], "--neighbour-decode-output-tokens"),
        (["--format", "xml"], "--format"),
        (["--decode-concurrency", "1,1025"], "'1025' of '1,1025' is above the maximum of 1024"),
        (["--decode-concurrency", "1," + "9" * 31], "is above the maximum of 1024"),
        (["--prefill-lens", "1,2,1048577"], "'1048577' of '1,2,1048577' is above the maximum"),
        (["--prefill-lens", ",".join(map(str, range(1, 66)))], "at most 64 are allowed"),
        (["--decode-tokens", "65537"], "--decode-tokens: '65537' is above the maximum of 65536"),
        (["--prefill-repeats", "101"], "--prefill-repeats: '101' is above the maximum of 100"),
        (["--decode-repeats", "1000"], "--decode-repeats: '1000' is above the maximum of 100"),
        (["--neighbour-decode-rps", "1e9"], "--neighbour-decode-rps: '1e9' is above the maximum"),
        (["--neighbour-prefill-tokens", "2000000"], "above the maximum of 1048576"),
        (["--merge", "a.json", "--out", "o.json"], "at least twice"),
        (["--merge", "a.json", "--merge", "b.json"], "requires --out"),
        (["--merge", "a", "--merge", "b", "--out", "o", "--only", "e0"], "exclusive with --only"),
        (["--merge", "a", "--merge", "b", "--out", "o", "--overwrite"], "with --overwrite"),
        (["--merge", "a", "--merge", "b", "--out", "o", "--refit-samples", "s"], "--refit-samples"),
        (["--merge", "a", "--merge", "a", "--out", "o"], "named more than once"),
        (["--merge", "a", "--merge", "b", "--out", "o", "--colocated"], "with --colocated"),
        (
            ["--merge", "a", "--merge", "b", "--out", "o", "--neighbour-decode-rps", "1"],
            "not to --merge",
        ),
        (["--refit-samples", "s", "--out", "o", "--colocated"], "with --colocated"),
        (["--refit-samples", "s.json"], "requires --out"),
        (["--refit-samples", "s", "--out", "o", "--only", "e0"], "exclusive with --only"),
        (["--refit-samples", "s", "--out", "o", "--overwrite"], "fresh outputs"),
        (["--out", "o.json"], "--out applies only to"),
        (["--colocated"], "requires all five neighbour options"),
        (["--colocated", "--neighbour-prefill-rps", "1"], "missing --neighbour-decode-rps"),
        (["--neighbour-prefill-rps", "1"], "requires --colocated"),
        (["--no-such-option"], "No such option"),
        (["--refit-samples", "s", "--out", "o", "--prefill-lens", "1,2"], "--prefill-lens"),
        (["--merge", "a", "--merge", "b", "--out", "o", "--decode-tokens", "0"], "--decode-tokens"),
        (["--keepalive-expiry", "0"], "--keepalive-expiry: '0' is not positive"),
        (["--keepalive-expiry", "x"], "--keepalive-expiry: 'x' is not a number"),
        (["--keepalive-expiry", "nan"], "--keepalive-expiry: 'nan' is not finite"),
        (["--keepalive-expiry", "7200"], "--keepalive-expiry: '7200' is above the maximum of 3600"),
        (["--refit-samples", "s", "--out", "o", "--keepalive-expiry", "2"], "not to --refit"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(
    fleet_file: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    """Every invalid value or conflicting mode exits 2 with one line naming it; writes nothing."""
    fleet_args = [] if args == [] else ["--fleet", str(fleet_file)]
    before = sorted(p.name for p in fleet_file.parent.iterdir())
    assert run([*fleet_args, *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("narwhal-profile: error: ")
    assert err.count("\n") == 1
    assert needle in err
    assert sorted(p.name for p in fleet_file.parent.iterdir()) == before


@pytest.mark.parametrize(
    "args",
    [
        ["--decode-tokens", "2"],
        ["--merge", "a.json"],
        ["--no-such-option"],
        ["--format", "json", "--prefill-lens", ""],
    ],
)
def test_usage_errors_in_json(
    fleet_file: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """With --format json a usage error is one result object on stdout (also for typer's own)."""
    assert run(["--format", "json", "--fleet", str(fleet_file), *args]) == 2
    out, err = capsys.readouterr()
    doc = orjson.loads(out)
    assert out.count("\n") == 1
    assert doc["format"] == "narwhal.profile.result" and doc["format_version"] == 1
    assert doc["ok"] is False and doc["profiles"] == 0
    assert doc["error"]["code"] == "usage"
    assert err == ""


def test_bad_fleet_file_exits_2_with_json_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fleet file violating its format exits 2 naming the JSON path of the bad value."""
    path = tmp_path / "fleet.json"
    path.write_bytes(
        orjson.dumps(
            {
                "format": "narwhal.fleet",
                "format_version": 1,
                "profiles": {"path": "p.json"},
                "engines": [{"iid": "e0", "url": "http://127.0.0.1:9", "role": "router"}],
            }
        )
    )
    assert run(["--fleet", str(path)]) == 2
    err = capsys.readouterr().err
    assert "engines[0].role" in err
    assert not (tmp_path / "p.json").exists()


def test_bad_limits_file_exits_2(
    fleet_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A limits file naming an engine outside the fleet exits 2 naming it."""
    limits = tmp_path / "limits.json"
    limits.write_bytes(
        orjson.dumps(
            {
                "format": "narwhal.limits",
                "format_version": 1,
                "engines": {"zz": {"max_num_seqs": 4}},
            }
        )
    )
    assert run(["--fleet", str(fleet_file), "--limits", str(limits)]) == 2
    err = capsys.readouterr().err
    assert "--limits" in err and "'zz'" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the installed distribution version."""
    from importlib.metadata import version

    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip().endswith(version("narwhal-profile-cli"))


def test_unreachable_engine_is_a_runtime_abort(
    fleet_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Valid options against an unreachable engine get past validation and abort with exit 1."""
    assert run(["--fleet", str(fleet_file), "--only", "e1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("narwhal-profile: error: engine e1: /health failed its HTTP 200 check")
    assert not (fleet_file.parent / "profiles").exists()


def test_interrupt_outside_a_sweep_reports_130_in_json(
    fleet_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in any mode exits 130 and, with --format json, still prints one result object."""
    import narwhal_profile_cli._run as run_module

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "execute", interrupted)
    assert run(["--format", "json", "--fleet", str(fleet_file)]) == 130
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["error"]["code"] == "interrupted"


@pytest.mark.parametrize(
    "mode_args",
    [
        [],
        ["--overwrite"],
        ["--refit-samples", "in.samples.json", "--out", "profiles/o.json"],
        ["--merge", "a.json", "--merge", "b.json", "--out", "profiles/o.json"],
    ],
)
def test_symlinked_destination_folder_refused_in_every_mode(
    fleet_file: Path, capsys: pytest.CaptureFixture[str], mode_args: list[str]
) -> None:
    """A destination folder that is a symlink is refused (exit 2) before anything is read or
    measured, and nothing appears behind the link."""
    real = fleet_file.parent / "real"
    real.mkdir()
    (fleet_file.parent / "profiles").symlink_to(real)
    args = [a if not a.startswith("profiles/") else str(fleet_file.parent / a) for a in mode_args]
    assert run(["--fleet", str(fleet_file), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("narwhal-profile: error: ") and "symlink" in err
    assert list(real.iterdir()) == []


def test_ctrl_c_whose_cancellation_is_swallowed_still_exits_130(
    fleet_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep that swallows the cancellation Ctrl-C sends and returns (seen once on a loaded
    machine, through a library: the command exited 0) still ends in exit 130, and the sweep
    saw the interrupt recorded, so it would stop before its next profile is written."""
    import asyncio
    import contextlib
    import os
    import signal

    import narwhal_profile_cli._run as run_module

    seen: list[bool] = []

    async def stubborn_sweep(*args: object, state: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as a careless library would
            await asyncio.sleep(30)
        seen.append(getattr(state, "interrupted", False))

    monkeypatch.setattr(run_module, "run_live", stubborn_sweep)
    assert run(["--fleet", str(fleet_file), "--only", "e1"]) == 130
    assert seen == [True]
    err = capsys.readouterr().err
    assert "narwhal-profile: error: interrupted; no profile was finished" in err
    assert not (fleet_file.parent / "profiles").exists()


def test_keepalive_expiry_parses_and_its_help_names_the_engine_clients_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from narwhal_engine_client import DEFAULT_KEEPALIVE_EXPIRY_S

    assert validate(RawOptions(keepalive_expiry="2.5")).keepalive_expiry_s == 2.5
    assert validate(RawOptions()).keepalive_expiry_s is None  # the engine client's default
    assert run(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {DEFAULT_KEEPALIVE_EXPIRY_S:g}, the engine client's" in text
