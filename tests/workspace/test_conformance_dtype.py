"""The conformance tier's model type (tools/conformance/_server.py): bfloat16 only where the CPU
multiplies it natively, float32 elsewhere, and the server's command line says which."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO))
    # the repo root is on sys.path only inside this fixture
    import tools.conformance._server as module

    return module


def _cpuinfo(flags: str) -> str:
    core = "processor\t: {n}\nmodel name\t: CPU\nflags\t\t: fpu sse2 avx avx2 fma {flags}\n\n"
    return "".join(core.format(n=n, flags=flags) for n in range(2))


@pytest.mark.parametrize(
    ("flags", "dtype"),
    [
        ("", "float32"),  # AVX2 only: bfloat16 would be emulated
        ("avx512f avx512bw", "float32"),  # AVX-512 without its BF16 extension
        ("avx512f avx512_bf16", "bfloat16"),
        ("amx_tile amx_bf16 amx_int8", "bfloat16"),
        ("xavx512_bf16", "float32"),  # a whole flag, not a substring
    ],
)
def test_bfloat16_only_with_native_bfloat16(server: ModuleType, flags: str, dtype: str) -> None:
    assert server.serving_dtype(_cpuinfo(flags)) == dtype


def test_the_command_line_names_the_dtype(server: ModuleType, tmp_path: Path) -> None:
    """``--dtype`` follows the served model's name; an unreadable cpuinfo means float32."""
    argv = server.server_argv(Path("py"), tmp_path, 8000, ("--max-num-seqs", "8"), "float32")
    at = argv.index("--dtype")
    assert argv[at + 1] == "float32" and argv[-2:] == ["--max-num-seqs", "8"]
    assert server.machine_dtype(tmp_path / "no-cpuinfo") == "float32"
    (tmp_path / "cpuinfo").write_text(_cpuinfo("amx_bf16"), encoding="utf-8")
    assert server.machine_dtype(tmp_path / "cpuinfo") == "bfloat16"
