"""``narwhal-sim``: serve a simulated vLLM fleet (thin typer shell over the library).

``--version`` prints the installed distribution's version (from its metadata).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer

from narwhal_sim._errors import SimError
from narwhal_sim._fleet import serve
from narwhal_sim._model_folder import write_model_folder
from narwhal_sim._up_options import UpOptions, options_signature
from narwhal_sim.model._presets import DEFAULT_PRESET, presets

PROG = "narwhal-sim"
DISTRIBUTION = "narwhal-sim"

app = typer.Typer(
    name="narwhal-sim",
    help="A vLLM-compatible simulated GPU fleet (engines + router) for tests, demos, benchmarks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} ({DISTRIBUTION}) {metadata.version(DISTRIBUTION)}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_version_callback,
            help="Print the installed distribution version.",
        ),
    ] = False,
) -> None:
    """The options before a command (``--version``)."""


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """The command layer's one shell, which every command enters: a ``SimError`` becomes one
    ``narwhal-sim: error: ...`` line and its exit code (2 for a value the simulator cannot use, 1
    when the fleet cannot start), Ctrl-C exit 130."""
    try:
        yield
    except SimError as exc:
        typer.echo(f"{PROG}: error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


_UP_HELP = "\n\n".join(
    [
        "Serve every engine of a fleet file (and the router) until Ctrl-C or SIGTERM.",
        "Example: narwhal-sim up --fleet examples/sim-fleet.json "
        "--sim-config examples/sim-config.json --router 127.0.0.1:18000",
        "Each engine answers the vLLM routes (/health, /version, /v1/models, /tokenize, "
        "/detokenize, /v1/completions, /metrics). For tests, on an engine port and from loopback "
        'only: POST /_sim/faults {"health_status": 503} (null clears a fault), '
        "POST /_sim/restart, GET /_sim/state.",
    ]
)


@app.command(no_args_is_help=True, help=_UP_HELP)
def up(**given: Any) -> None:
    """Serve every engine of a fleet file (and the router) until Ctrl-C or SIGTERM."""
    options = UpOptions(**given)
    watch = os.environ.get("NARWHAL_SIM_PARENT_PID", "")
    with _errors():
        plan = options.plan()
        asyncio.run(
            serve(
                plan.engines,
                router=plan.router,
                time_scale=options.time_scale,
                slowdown=options.slowdown,
                seed=options.seed,
                ready_file=options.ready_file,
                announce=lambda line: print(f"narwhal-sim: {line}", flush=True),
                parent_pid=int(watch) if watch.isdigit() else None,
            )
        )
    print("narwhal-sim: stopped", flush=True)


up.__signature__ = options_signature(UpOptions)  # type: ignore[attr-defined]


@app.command("model-folder", no_args_is_help=True)
def model_folder(
    out: Annotated[
        Path,
        typer.Option("--out", help="The folder to write (created; its three files replaced)."),
    ],
    context_length: Annotated[
        int,
        typer.Option(
            "--context-length",
            metavar="N",
            help="max_position_embeddings of config.json, model_max_length of the tokenizer.",
        ),
    ] = 131072,
) -> None:
    """Write a HuggingFace model folder (config.json, tokenizer.json, tokenizer_config.json)
    whose tokenizer is the simulator's: the tokenizers library turns the simulator's completion
    text back into its token ids (for a frontend such as Dynamo's in front of simulated engines)."""
    with _errors():
        written = write_model_folder(out, context_length=context_length)
    for path in written:
        print(f"narwhal-sim: wrote {path}", flush=True)


@app.command("presets")
def list_presets() -> None:
    """List the latency presets and their coefficients."""
    for name, p in sorted(presets().items()):
        mark = " (default)" if name == DEFAULT_PRESET else ""
        print(f"{name}{mark}: {p.description}")
        print(
            f"    prefill a={p.a * 1e3:.2f} ms b={p.b:.3g} s/tok c={p.c:.3g} s/tok^2 "
            f"(+{p.e * 1e3:.2f} ms per extra chunk of {p.max_num_batched_tokens})"
        )
        print(
            f"    decode  d0={p.d0 * 1e3:.2f} ms d1={p.d1:.3g} s/seq d2={p.d2:.3g} s/ctx-token; "
            f"KV {p.kv_cache_tokens} tokens; jitter {p.jitter:.0%}"
        )


def main(argv: list[str] | None = None) -> None:
    """Console entry point: a usage error typer finds itself is one line (exit 2), as every other
    error, never click's usage block."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    try:
        code = command.main(args=args or ["--help"], prog_name="narwhal-sim", standalone_mode=False)
    except typer.TyperException as exc:
        typer.echo(f"narwhal-sim: error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
