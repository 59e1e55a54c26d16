"""How the trial reaches a server: a ``--base`` without credentials, and the API key's variable.

The key itself is never on the command line and never in any file or message: the trial knows the
name of the variable it came from, and the engine client keeps the key inside its HTTP headers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from narwhal_engine_client import EngineClient, EngineHTTPError
from narwhal_trial._errors import TrialUsageError

DEFAULT_API_KEY_ENV: Final = "NARWHAL_API_KEY"
"""The variable read when ``--api-key-env`` is not given; unset, no key is sent."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_REFUSED = (401, 403)


def refuse_credentials(base: str) -> None:
    """TrialUsageError (exit 1) when ``--base`` carries user info (``user:password@``), a query
    (where tokens travel) or a fragment; the URL is not echoed, as the fleet loader does."""
    parts = urlsplit(base)
    if "@" in parts.netloc or parts.query or parts.fragment:
        raise TrialUsageError(
            "--base must not carry credentials (user:password@, a query or a fragment); put the "
            "key in an environment variable and name it with --api-key-env"
        )


@dataclass(frozen=True, slots=True)
class ApiKeyEnv:
    """Where the API key comes from: the variable's name and whether it holds a key (then sent).

    Holds no key: the engine client reads it from the environment (``EngineClient.from_env``).
    """

    name: str
    given: bool
    """named with ``--api-key-env`` (else ``DEFAULT_API_KEY_ENV``)"""
    is_set: bool

    @classmethod
    def choose(cls, name: str | None, environ: Mapping[str, str] | None = None) -> ApiKeyEnv:
        """``--api-key-env NAME`` (None: the default variable, optional). A NAME given that is
        unset or empty, or that is not a variable name at all (a key pasted by mistake, never
        echoed), is a TrialUsageError (exit 1)."""
        env = os.environ if environ is None else environ
        if name is None:
            return cls(DEFAULT_API_KEY_ENV, False, bool(env.get(DEFAULT_API_KEY_ENV)))
        if not _ENV_NAME.match(name):
            raise TrialUsageError(
                "--api-key-env takes the NAME of an environment variable holding the key "
                "(letters, digits, _), never the key itself"
            )
        if not env.get(name):
            raise TrialUsageError(f"--api-key-env {name}: environment variable {name} is not set")
        return cls(name, True, True)

    @property
    def sent_from(self) -> str | None:
        """The variable the key is read from; None when no key is sent."""
        return self.name if self.is_set else None

    def client(self, base_url: str, **kw: Any) -> EngineClient:
        """An engine client that sends the key (if any) on every route."""
        return EngineClient.from_env(base_url, self.sent_from, **kw)

    def refusal(self, error: BaseException | None, url: str | None = None) -> str | None:
        """The message for an HTTP 401 or 403 that is ``error`` or caused it (``url``: where, when
        the error does not say); None for any other error."""
        http = _http_error(error)
        if http is None or http.status not in _REFUSED:
            return None
        where = http.url or url or "the server"
        if self.is_set:
            about = f"the key in {self.name} was refused"
        else:
            about = f"{self.name} is not set (use --api-key-env NAME)"
        return f"HTTP {http.status} from {where}: the server wants an API key; {about}"


def _http_error(error: BaseException | None) -> EngineHTTPError | None:
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, EngineHTTPError):
            return error
        error, seen = error.__cause__, seen + 1
    return None


def redact_url(url: str) -> str:
    """``url`` with any password in its user info replaced by ``***`` (for messages)."""
    return re.sub(r"(//[^/@:]*):[^/@]*@", r"\1:***@", url)


def check_base_url(url: str, flag: str = "--base") -> None:
    """Refuse (TrialUsageError, exit 1) a ``--base`` (or ``flag``) that is not an
    ``http(s)://HOST[:PORT]`` URL; the message never shows a password."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TrialUsageError(f"{flag} {shown!r}: not a valid URL ({exc})") from None
    refuse_credentials(url)  # user info, a query or a fragment: never echoed, never recorded
    if parts.scheme not in ("http", "https"):
        raise TrialUsageError(f"{flag} must be an http:// or https:// URL, got {shown!r}")
    if not parts.hostname:
        raise TrialUsageError(f"{flag} {shown!r} has no host")
    if port == 0:
        raise TrialUsageError(f"{flag} {shown!r} has port 0")
