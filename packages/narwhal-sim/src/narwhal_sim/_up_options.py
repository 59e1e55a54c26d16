"""``narwhal-sim up``'s options, declared once as the fields of ``UpOptions`` (each annotation
carries its typer declaration, as the profiler's and the trial's options do), and the engines and
router they make, checked before anything is served: ``UpOptions.plan`` raises SimConfigError
(exit 2) naming the option and the value."""

from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_type_hints

import typer

from narwhal_sim._auth import env_key
from narwhal_sim._errors import SimConfigError, SimError
from narwhal_sim._fleet import RouterSettings
from narwhal_sim.model._config import (
    EngineSettings,
    check_file_destination,
    check_journal,
    is_loopback,
    load_json,
    resolve_engines,
    split_hostport,
)
from narwhal_sim.model._presets import DEFAULT_PRESET, get_preset
from narwhal_sim.router._router import ROUTER_OMITS
from narwhal_sim.router.dynamo._wire import MIMICS
from narwhal_store import StoreError, load_fleet

_ROUTER_ONLY = (
    "--journal, --router-api-key-env, --router-omit, --router-mimic and --router-context-length "
    "need --router"
)


@dataclass(frozen=True, slots=True)
class UpPlan:
    """What ``up`` serves: every engine's settings and the router's (None: no router)."""

    engines: list[EngineSettings]
    router: RouterSettings | None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpOptions:
    """Every option of ``narwhal-sim up``, in ``--help`` order."""

    fleet: Annotated[
        Path,
        typer.Option(
            "--fleet",
            help="narwhal.fleet JSON: one simulated engine per entry (its url "
            "gives host and port; shared_device.group engines share one GPU).",
        ),
    ]
    sim_config: Annotated[
        Path | None,
        typer.Option(
            "--sim-config",
            help="narwhal.sim JSON: per-engine API style, "
            "preset, limits, scheduler (shared or turns), faults (see the package README).",
        ),
    ] = None
    router: Annotated[
        str | None,
        typer.Option(
            "--router",
            metavar="HOST:PORT",
            help="Also start the router here (e.g. 127.0.0.1:18000).",
        ),
    ] = None
    journal: Annotated[
        Path | None,
        typer.Option(
            "--journal",
            help="Router journal: one JSON line per request "
            "(default: router-journal.jsonl beside the fleet file).",
        ),
    ] = None
    preset: Annotated[
        str | None,
        typer.Option(
            "--preset",
            help=f"Latency preset of every engine without its own in the --sim-config engines "
            f"table (default {DEFAULT_PRESET}; `narwhal-sim presets`).",
        ),
    ] = None
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            help="Run simulated time X times faster (every duration is divided by X).",
        ),
    ] = 1.0
    slowdown: Annotated[
        float,
        typer.Option(
            "--slowdown",
            help="Run every engine X times slower than its preset (every step's duration and the "
            "API overhead multiplied by X; 1.2: 20 % slower, as a busy host makes a GPU), in "
            "simulated time: the engines' own metrics show it too.",
        ),
    ] = 1.0
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the timing jitter and fault draws.")
    ] = 0
    ready_file: Annotated[
        Path | None,
        typer.Option(
            "--ready-file",
            help="Write this JSON file (engine URLs, router URL) once every socket listens.",
        ),
    ] = None
    allow_non_loopback: Annotated[
        bool,
        typer.Option(
            "--allow-non-loopback", help="Serve fleet URLs that are not loopback addresses."
        ),
    ] = False
    router_api_key_env: Annotated[
        str | None,
        typer.Option(
            "--router-api-key-env",
            metavar="NAME",
            help="The router requires the key held in this environment variable (Authorization: "
            "Bearer, as vllm serve --api-key); engines with their own api_key_env get theirs.",
        ),
    ] = None
    router_auth_scope: Annotated[
        Literal["v1", "all"],
        typer.Option(
            "--router-auth-scope",
            help="Routes the router's key guards: v1 (vLLM's: /v1/*) or all (/metrics, "
            "/tokenize, /health too, as a gateway that checks every request).",
        ),
    ] = "v1"
    router_omit: Annotated[
        list[str] | None,
        typer.Option(
            "--router-omit",
            metavar="WHAT",
            help="Leave out, like a router that is not ours (repeat): tokenize (/tokenize, "
            "/detokenize answer 404), max-model-len (none in /v1/models), metrics (404).",
        ),
    ] = None
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
    ] = None
    router_context_length: Annotated[
        int | None,
        typer.Option(
            "--router-context-length",
            metavar="N",
            help="With --router-mimic dynamo: the context length the frontend reports "
            "(context_window, dynamo_frontend_model_context_length; default 0, as Dynamo's "
            "mocker engine).",
        ),
    ] = None

    def plan(self) -> UpPlan:
        """The engines and the router these options make; SimConfigError names a bad value."""
        if not math.isfinite(self.time_scale) or self.time_scale <= 0:
            raise SimConfigError(
                f"--time-scale must be a finite positive number, got {self.time_scale}"
            )
        if not math.isfinite(self.slowdown) or self.slowdown <= 0:
            raise SimConfigError(
                f"--slowdown must be a finite positive number, got {self.slowdown}"
            )
        if self.preset is not None:
            try:
                get_preset(self.preset)
            except KeyError as exc:
                raise SimConfigError(exc.args[0]) from None
        try:
            loaded = load_fleet(self.fleet)  # the fleet format exactly as narwhal-profile reads it
        except StoreError as exc:
            raise SimConfigError(f"--fleet: {exc}") from None
        try:
            sim_doc = load_json(self.sim_config, "sim config") if self.sim_config else None
            engines = resolve_engines(
                loaded, sim_doc, preset=self.preset, allow_non_loopback=self.allow_non_loopback
            )
            router = self._router()
            if self.ready_file is not None:
                check_file_destination(self.ready_file, "--ready-file")
            unknown = ", ".join(sorted(set(self.router_omit or ()) - set(ROUTER_OMITS)))
            if unknown:
                raise SimConfigError(
                    f"--router-omit: unknown {unknown} (use {', '.join(ROUTER_OMITS)})"
                )
            if self.router_api_key_env is not None and env_key(self.router_api_key_env) is None:
                raise SimConfigError(
                    f"--router-api-key-env: variable {self.router_api_key_env} is not set"
                )
        except SimConfigError:
            raise
        except SimError as exc:
            raise SimConfigError(str(exc)) from exc
        return UpPlan(engines, router)

    def _router(self) -> RouterSettings | None:
        if self.router is None:
            if (
                self.journal is not None
                or self.router_api_key_env is not None
                or self.router_omit
                or self.router_mimic is not None
                or self.router_context_length is not None
            ):
                raise SimConfigError(_ROUTER_ONLY)
            return None
        host, port = split_hostport(self.router, "--router")
        if not self.allow_non_loopback and not is_loopback(host):
            raise SimConfigError(
                f"--router {self.router}: {host} is not loopback (use --allow-non-loopback)"
            )
        return RouterSettings(
            host,
            port,
            check_journal(self.journal or self.fleet.parent / "router-journal.jsonl"),
            api_key_env=self.router_api_key_env,
            auth_scope=self.router_auth_scope,
            omit=frozenset(self.router_omit or ()),
            mimic=self._mimic(),
            context_length=self.router_context_length or 0,
        )

    def _mimic(self) -> str | None:
        """The checked ``--router-mimic`` (with what goes with it)."""
        mimic, context_length = self.router_mimic, self.router_context_length
        if mimic is not None and mimic not in MIMICS:
            raise SimConfigError(f"--router-mimic: unknown {mimic!r} (use {', '.join(MIMICS)})")
        if mimic is not None and self.router_omit:
            raise SimConfigError(f"--router-omit cannot be combined with --router-mimic {mimic}")
        if context_length is not None and mimic is None:
            raise SimConfigError("--router-context-length needs --router-mimic dynamo")
        if context_length is not None and context_length < 0:
            raise SimConfigError(f"--router-context-length must be 0 or more, got {context_length}")
        return mimic


def options_signature(options: type[Any]) -> inspect.Signature:
    """A command's parameters as typer reads them: each field of ``options`` (its typer
    declaration and default), keyword-only, in order."""
    hints = get_type_hints(options, include_extras=True)
    return inspect.Signature(
        [
            inspect.Parameter(
                field.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty
                if field.default is dataclasses.MISSING
                else field.default,
                annotation=hints[field.name],
            )
            for field in dataclasses.fields(options)
        ]
    )
