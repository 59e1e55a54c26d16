"""``narwhal-sim``: serve a simulated vLLM fleet (thin typer shell over the library).

``--version`` prints the installed distribution's version (from its metadata).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
from importlib import metadata
from pathlib import Path
from typing import Annotated, Literal

import typer

from narwhal_sim._auth import env_key
from narwhal_sim._errors import SimError
from narwhal_sim._fleet import RouterSettings, serve
from narwhal_sim._model_folder import write_model_folder
from narwhal_sim.model._config import (
    check_file_destination,
    check_journal,
    is_loopback,
    load_json,
    resolve_engines,
    split_hostport,
)
from narwhal_sim.model._presets import DEFAULT_PRESET, get_preset, presets
from narwhal_sim.router._router import ROUTER_OMITS
from narwhal_sim.router.dynamo._wire import MIMICS
from narwhal_store import StoreError, load_fleet

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


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"narwhal-sim: error: {message}", err=True)
    return typer.Exit(code)


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
def up(
    fleet: Annotated[
        Path,
        typer.Option(
            "--fleet",
            help="narwhal.fleet JSON: one simulated engine per entry (its url "
            "gives host and port; shared_device.group engines share one GPU).",
        ),
    ],
    sim_config: Annotated[
        Path | None,
        typer.Option(
            "--sim-config",
            help="narwhal.sim JSON: per-engine API style, "
            "preset, limits, scheduler (shared or turns), faults (see the package README).",
        ),
    ] = None,
    router: Annotated[
        str | None,
        typer.Option(
            "--router",
            metavar="HOST:PORT",
            help="Also start the router here (e.g. 127.0.0.1:18000).",
        ),
    ] = None,
    journal: Annotated[
        Path | None,
        typer.Option(
            "--journal",
            help="Router journal: one JSON line per request "
            "(default: router-journal.jsonl beside the fleet file).",
        ),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            "--preset",
            help=f"Latency preset of every engine without its own in the --sim-config engines "
            f"table (default {DEFAULT_PRESET}; `narwhal-sim presets`).",
        ),
    ] = None,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            help="Run simulated time X times faster (every duration is divided by X).",
        ),
    ] = 1.0,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the timing jitter and fault draws.")
    ] = 0,
    ready_file: Annotated[
        Path | None,
        typer.Option(
            "--ready-file",
            help="Write this JSON file (engine URLs, router URL) once every socket listens.",
        ),
    ] = None,
    allow_non_loopback: Annotated[
        bool,
        typer.Option(
            "--allow-non-loopback", help="Serve fleet URLs that are not loopback addresses."
        ),
    ] = False,
    router_api_key_env: Annotated[
        str | None,
        typer.Option(
            "--router-api-key-env",
            metavar="NAME",
            help="The router requires the key held in this environment variable (Authorization: "
            "Bearer, as vllm serve --api-key); engines with their own api_key_env get theirs.",
        ),
    ] = None,
    router_auth_scope: Annotated[
        Literal["v1", "all"],
        typer.Option(
            "--router-auth-scope",
            help="Routes the router's key guards: v1 (vLLM's: /v1/*) or all (/metrics, "
            "/tokenize, /health too, as a gateway that checks every request).",
        ),
    ] = "v1",
    router_omit: Annotated[
        list[str] | None,
        typer.Option(
            "--router-omit",
            metavar="WHAT",
            help="Leave out, like a router that is not ours (repeat): tokenize (/tokenize, "
            "/detokenize answer 404), max-model-len (none in /v1/models), metrics (404).",
        ),
    ] = None,
    router_mimic: Annotated[
        str | None,
        typer.Option(
            "--router-mimic",
            metavar="FRONTEND",
            help="Answer as another frontend does: dynamo (NVIDIA Dynamo 1.6.1's OpenAI "
            "frontend: its 400 for add_special_tokens/return_token_ids, 404 for /tokenize, "
            "/detokenize, /version, /server_info, context_window cards, its chunks and its "
            "dynamo_frontend_* /metrics; see the package README).",
        ),
    ] = None,
    router_context_length: Annotated[
        int | None,
        typer.Option(
            "--router-context-length",
            metavar="N",
            help="With --router-mimic dynamo: the context length the frontend reports "
            "(context_window, dynamo_frontend_model_context_length; default 0, as Dynamo's "
            "mocker engine).",
        ),
    ] = None,
) -> None:
    """Serve every engine of a fleet file (and the router) until Ctrl-C or SIGTERM."""
    if not math.isfinite(time_scale) or time_scale <= 0:
        raise _fail(f"--time-scale must be a finite positive number, got {time_scale}")
    if preset is not None:
        try:
            get_preset(preset)
        except KeyError as exc:
            raise _fail(exc.args[0]) from None
    try:
        loaded = load_fleet(fleet)  # the fleet format exactly as narwhal-profile reads it
    except StoreError as exc:
        raise _fail(f"--fleet: {exc}") from None
    try:
        sim_doc = load_json(sim_config, "sim config") if sim_config is not None else None
        settings = resolve_engines(
            loaded, sim_doc, preset=preset, allow_non_loopback=allow_non_loopback
        )
        router_settings = None
        if router is not None:
            host, port = split_hostport(router, "--router")
            if not allow_non_loopback and not is_loopback(host):
                raise _fail(f"--router {router}: {host} is not loopback (use --allow-non-loopback)")
            router_settings = RouterSettings(
                host,
                port,
                check_journal(journal or fleet.parent / "router-journal.jsonl"),
                api_key_env=router_api_key_env,
                auth_scope=router_auth_scope,
                omit=frozenset(router_omit or ()),
                mimic=_mimic(router_mimic, router_omit, router_context_length),
                context_length=router_context_length or 0,
            )
        elif (
            journal is not None
            or router_api_key_env is not None
            or router_omit
            or router_mimic is not None
            or router_context_length is not None
        ):
            raise _fail(
                "--journal, --router-api-key-env, --router-omit, --router-mimic and "
                "--router-context-length need --router"
            )
        if ready_file is not None:
            check_file_destination(ready_file, "--ready-file")
        unknown = ", ".join(sorted(set(router_omit or ()) - set(ROUTER_OMITS)))
        if unknown:
            raise _fail(f"--router-omit: unknown {unknown} (use {', '.join(ROUTER_OMITS)})")
        if router_api_key_env is not None and env_key(router_api_key_env) is None:
            raise _fail(f"--router-api-key-env: variable {router_api_key_env} is not set")
    except SimError as exc:
        raise _fail(str(exc)) from None
    watch = os.environ.get("NARWHAL_SIM_PARENT_PID", "")
    try:
        asyncio.run(
            serve(
                settings,
                router=router_settings,
                time_scale=time_scale,
                seed=seed,
                ready_file=ready_file,
                announce=lambda line: print(f"narwhal-sim: {line}", flush=True),
                parent_pid=int(watch) if watch.isdigit() else None,
            )
        )
    except SimError as exc:
        raise _fail(str(exc), 1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    print("narwhal-sim: stopped", flush=True)


def _mimic(mimic: str | None, omit: list[str] | None, context_length: int | None) -> str | None:
    """The checked ``--router-mimic`` (with what goes with it)."""
    if mimic is not None and mimic not in MIMICS:
        raise _fail(f"--router-mimic: unknown {mimic!r} (use {', '.join(MIMICS)})")
    if mimic is not None and omit:
        raise _fail(f"--router-omit cannot be combined with --router-mimic {mimic}")
    if context_length is not None and mimic is None:
        raise _fail("--router-context-length needs --router-mimic dynamo")
    if context_length is not None and context_length < 0:
        raise _fail(f"--router-context-length must be 0 or more, got {context_length}")
    return mimic


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
    try:
        written = write_model_folder(out, context_length=context_length)
    except SimError as exc:
        raise _fail(str(exc)) from None
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
