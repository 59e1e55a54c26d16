"""Options declared once as dataclass fields (``narwhal_trial.cli._declare``): typer sees each
field as an option of the command, and the command gets each group built once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from narwhal_trial.cli._declare import declared


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shared:
    name: Annotated[str, typer.Option("--name", help="A required option.")]
    count: Annotated[int, typer.Option("--count", min=1, help="A bounded one.")] = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class _Own:
    loud: Annotated[bool, typer.Option("--loud/--quiet")] = False


def _app(seen: list[object]) -> typer.Typer:
    def command(ctx: typer.Context, shared: _Shared, own: _Own) -> None:
        seen.extend([ctx.info_name, shared, own])

    app = typer.Typer(add_completion=False)
    app.command("cmd")(declared(command, shared=_Shared, own=_Own))
    app.command("other")(lambda: None)
    return app


def test_fields_become_options_and_groups_are_built_once() -> None:
    seen: list[object] = []
    result = CliRunner().invoke(_app(seen), ["cmd", "--name", "a", "--loud"])
    assert result.exit_code == 0, result.output
    assert seen == ["cmd", _Shared(name="a", count=3), _Own(loud=True)]


def test_typer_checks_the_fields_declarations() -> None:
    """The declaration carried by a field is typer's: a bound, a required option, ``--help``."""
    runner = CliRunner()
    low = runner.invoke(_app([]), ["cmd", "--name", "a", "--count", "0"])
    assert low.exit_code == 2 and "--count" in low.output
    missing = runner.invoke(_app([]), ["cmd"])
    assert missing.exit_code == 2 and "--name" in missing.output
    shown = runner.invoke(_app([]), ["cmd", "--help"]).output
    assert shown.index("--name") < shown.index("--count") < shown.index("--loud")


def test_an_option_declared_twice_is_refused() -> None:
    def command(name: str, shared: _Shared) -> None:
        del name, shared

    with pytest.raises(TypeError, match="declared twice: name"):
        declared(command, shared=_Shared)
    with pytest.raises(TypeError, match="declared twice: count, name"):
        declared(lambda a, b: None, a=_Shared, b=_Shared)
