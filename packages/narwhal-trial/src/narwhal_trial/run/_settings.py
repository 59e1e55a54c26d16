"""The settings of one ``run``, validated before anything is touched."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Literal

from narwhal_engine_client import DEFAULT_KEEPALIVE_EXPIRY_S, StreamTransport
from narwhal_trial._access import ApiKeyEnv, check_base_url, redact_url
from narwhal_trial._errors import TrialUsageError
from narwhal_trial._limits import (
    DEFAULT_MAX_IN_FLIGHT,
    MAX_IN_FLIGHT,
    MAX_RATE,
    MAX_REQUESTS,
    MAX_SCHEDULE_S,
)
from narwhal_trial.run._drain import DEFAULT_PRESET, DRAIN_PRESETS, DrainPreset
from narwhal_trial.run._event_loop import DEFAULT_LOOP, LoopChoice, check_loop

RUN_FILES = ("manifest.json", "requests.jsonl", "summary.json")

TransportChoice = Literal["auto", "httpx", "raw"]
"""``--transport``: ``auto`` is the raw HTTP/1.1 transport for an ``http://`` base and httpx for
``https://`` (the raw transport has no TLS)."""


def receiver_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` of ``--otlp-receiver`` (port 0: any free port); TrialUsageError otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise TrialUsageError(
            f"--otlp-receiver must be HOST:PORT (for example 127.0.0.1:4318), got {text!r}"
        )
    return host, int(port)


@dataclass(frozen=True, slots=True)
class RunSettings:
    """Everything ``run`` was asked to do; the runbook's flags plus the client limits."""

    base_url: str
    workload_path: Path
    rate: float
    requests: int
    ttft_s: Decimal
    tpot_s: Decimal
    attainment: Decimal
    out: Path
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    max_lag_s: float = 0.050
    request_timeout_s: float = 300.0
    drain_timeout_s: float = 600.0
    keepalive_expiry_s: float = DEFAULT_KEEPALIVE_EXPIRY_S
    """``--keepalive-expiry``: an idle connection older than this is never reused"""
    drain_poll_s: float = 0.25
    drain_gauges: tuple[str, ...] = ()
    """``--drain-gauge``: replaces the preset's gauges when given"""
    transport: TransportChoice = "auto"
    command: tuple[str, ...] = ()
    launcher: Path | None = None
    drain_preset: DrainPreset | None = None
    """``--drain-preset`` (None: ``narwhal-router``, unless ``drain_gauges`` are given)"""
    api_key_env: str | None = None
    """``--api-key-env``: the variable holding the key (None: ``NARWHAL_API_KEY`` when set)"""
    max_model_len: int | None = None
    """``--max-model-len``: the context limit, for a server that reports none"""
    launch_records: tuple[Path, ...] = ()
    """``--launch-record``: the engines' launch records, copied into the run folder"""
    fleet: Path | None = None
    """``--fleet``: the engines whose ``/metrics`` are read around the run (with their roles)"""
    engine_metrics: tuple[str, ...] = ()
    """``--engine-metrics``: more engine base URLs whose ``/metrics`` are read"""
    server_metrics: bool = True
    """``--no-server-metrics`` turns the readings (and ``server.json``) off"""
    otlp_receiver: str | None = None
    """``--otlp-receiver HOST:PORT``: receive the engines' trace spans during the run"""
    otlp_wait_s: float = 15.0
    """``--otlp-wait``: how long after the last stream to wait for the last spans"""
    speedup: float | None = None
    """``--speedup``: a scheduled workload's time axis divided by it (None: the runbook's)"""
    loop: LoopChoice = DEFAULT_LOOP
    """``--loop``: the client's event loop (``auto``: uvloop when importable, else asyncio)"""

    def validate(self) -> None:
        """Raise TrialUsageError (exit 1, before anything is touched) for a value the run cannot
        use."""
        check_base_url(self.base_url)
        self.api_keys()
        checks = [
            (
                math.isfinite(self.rate) and 0 < self.rate <= MAX_RATE,
                f"--rate must be positive and at most {MAX_RATE:g} per second, got {self.rate}",
            ),
            (
                1 <= self.requests <= MAX_REQUESTS,
                f"--requests must be from 1 to {MAX_REQUESTS}, got {self.requests}",
            ),
            (
                not (self.rate > 0) or (self.requests - 1) / self.rate <= MAX_SCHEDULE_S,
                f"--requests {self.requests} at --rate {self.rate:g} would offer for "
                f"{(self.requests - 1) / self.rate if self.rate > 0 else 0:.0f} s; the schedule "
                f"must end within {MAX_SCHEDULE_S:.0f} s (a day)",
            ),
            (
                1 <= self.max_in_flight <= MAX_IN_FLIGHT,
                f"--max-in-flight must be from 1 to {MAX_IN_FLIGHT}, got {self.max_in_flight}",
            ),
            (
                math.isfinite(self.max_lag_s) and self.max_lag_s >= 0,
                f"--max-lag must be a non-negative number of seconds, got {self.max_lag_s}",
            ),
            (
                math.isfinite(self.request_timeout_s) and self.request_timeout_s > 0,
                f"--request-timeout must be positive, got {self.request_timeout_s}",
            ),
            (
                math.isfinite(self.drain_timeout_s) and self.drain_timeout_s > 0,
                f"--drain-timeout must be positive, got {self.drain_timeout_s}",
            ),
            (
                math.isfinite(self.keepalive_expiry_s) and 0 < self.keepalive_expiry_s <= 3600,
                "--keepalive-expiry must be positive seconds (at most 3600), got "
                f"{self.keepalive_expiry_s}",
            ),
            (
                not (self.drain_gauges and self.drain_preset),
                "give --drain-preset or --drain-gauge, not both",
            ),
            (
                self.drain_preset is None or self.drain_preset in DRAIN_PRESETS,
                f"--drain-preset must be one of {', '.join(DRAIN_PRESETS)}, got "
                f"{self.drain_preset!r}",
            ),
            (
                self.max_model_len is None or self.max_model_len >= 1,
                f"--max-model-len must be at least 1, got {self.max_model_len}",
            ),
            (
                self.transport in ("auto", "httpx", "raw"),
                f"--transport must be auto, httpx or raw, got {self.transport!r}",
            ),
            (
                self.transport != "raw" or self.base_url.startswith("http://"),
                "--transport raw needs an http:// --base (it has no TLS), got "
                f"{redact_url(self.base_url)!r}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise TrialUsageError(message)
        for url in self.engine_metrics:
            check_base_url(url, "--engine-metrics")
        if self.otlp_receiver is not None:
            receiver_address(self.otlp_receiver)
        if not (math.isfinite(self.otlp_wait_s) and 0 <= self.otlp_wait_s <= 600):
            raise TrialUsageError(f"--otlp-wait must be 0 to 600 seconds, got {self.otlp_wait_s}")
        check_loop(self.loop)
        if self.otlp_receiver is not None and not self.server_metrics:
            raise TrialUsageError("--otlp-receiver needs the server view: drop --no-server-metrics")

    def api_keys(self) -> ApiKeyEnv:
        """Where the API key comes from (TrialUsageError for a named variable that is unset)."""
        return ApiKeyEnv.choose(self.api_key_env)

    @property
    def drain(self) -> tuple[DrainPreset | None, tuple[str, ...]]:
        """The drain's preset and gauges: the ``--drain-gauge`` list (preset None), else the
        preset's; no gauges means no drain check (``none``)."""
        if self.drain_gauges:
            return None, self.drain_gauges
        preset = self.drain_preset or DEFAULT_PRESET
        return preset, DRAIN_PRESETS[preset]

    @property
    def stream_transport(self) -> StreamTransport:
        """What carries the streaming requests, ``auto`` resolved against the base URL."""
        if self.transport == "auto":
            return "raw" if self.base_url.startswith("http://") else "httpx"
        return self.transport

    def arguments(self) -> dict[str, str | int | float | bool | list[str] | None]:
        """The arguments as the manifest records them."""
        return {
            "base": self.base_url,
            "workload": str(self.workload_path),
            "rate": self.rate,
            "requests": self.requests,
            "ttft": str(self.ttft_s),
            "tpot": str(self.tpot_s),
            "attainment": str(self.attainment),
            "out": str(self.out),
            "max_in_flight": self.max_in_flight,
            "max_lag": self.max_lag_s,
            "request_timeout": self.request_timeout_s,
            "drain_timeout": self.drain_timeout_s,
            "keepalive_expiry": self.keepalive_expiry_s,
            "drain_gauges": list(self.drain_gauges),
            "transport": self.transport,
            "drain_preset": self.drain_preset,
            "api_key_env": self.api_key_env,
            "max_model_len": self.max_model_len,
            "launch_records": [str(p) for p in self.launch_records],
            "fleet": None if self.fleet is None else str(self.fleet),
            "engine_metrics": [redact_url(u) for u in self.engine_metrics],
            "server_metrics": self.server_metrics,
            "otlp_receiver": self.otlp_receiver,
            "otlp_wait": self.otlp_wait_s,
            "loop": self.loop,
            # only a scheduled workload's run has it: the runbook's manifest is unchanged
            **({} if self.speedup is None else {"speedup": self.speedup}),
        }
