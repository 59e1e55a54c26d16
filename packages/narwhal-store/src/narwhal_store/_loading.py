"""Reading JSON files into models, turning every failure into a ``FormatError`` with a JSON path."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from narwhal_store._canonical import sha256_hex
from narwhal_store._errors import FormatError
from narwhal_store._fields import LocatedValueError, SecretValueError

__all__ = [
    "format_validation_error",
    "json_path",
    "load_model",
    "parse_json",
    "read_json",
    "validate_doc",
]

M = TypeVar("M", bound=BaseModel)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GOT_LIMIT = 80
_NO_GOT = frozenset({"missing", "model_type", "model_attributes_type", "dict_type", "list_type"})


def json_path(loc: Sequence[int | str]) -> str:
    """``("engines", 1, "role")`` → ``engines[1].role``; odd keys are quoted: ``engines["a b"]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{orjson.dumps(part).decode()}]"
    return out


def _got(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _GOT_LIMIT else text[: _GOT_LIMIT - 3] + "..."


def _describe(error: ErrorDetails) -> tuple[str, str]:
    loc = error["loc"]
    ctx = error.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, LocatedValueError):
        prefix = json_path(loc)
        inner = cause.json_path
        path = f"{prefix}.{inner}" if prefix and not inner.startswith("[") else prefix + inner
        return path, cause.message
    if isinstance(cause, SecretValueError):
        return json_path(loc), str(cause)
    message = error["msg"]
    if loc and loc[-1] == "[key]":
        loc = loc[:-1]
        message = f"invalid key: {message}"
    if error["type"] == "value_error" and message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if error["type"] == "extra_forbidden":
        message = "unknown key (not allowed here)"
    elif error["type"] not in _NO_GOT:
        message = f"{message} (got {_got(error['input'])})"
    return json_path(loc), message


def format_validation_error(path: str | Path, exc: ValidationError) -> FormatError:
    """Every error of ``exc`` as one ``FormatError`` (``json_path`` is the first one's); the
    further errors follow the first, ``; ``-separated, each with its JSON path."""
    described = [_describe(error) for error in exc.errors()]
    where, message = described[0]
    for other, text in described[1:]:
        message += f"; {other}: {text}" if other else f"; {text}"
    return FormatError(path, where, message)


def read_json(path: str | Path) -> tuple[bytes, Any]:
    """The file's bytes and parsed JSON; ``FormatError`` when unreadable or not JSON."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(path, "", f"cannot read: {exc.strerror or exc}") from exc
    return data, parse_json(path, data)


def parse_json(path: str | Path, data: bytes) -> Any:
    """Parse JSON bytes read from ``path``; ``FormatError`` naming the file when invalid."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FormatError(path, "", f"not valid JSON: {exc}") from exc


def validate_doc(path: str | Path, model: type[M], raw: Any) -> M:
    """Validate parsed JSON against ``model``; errors name ``path`` and the JSON path."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise format_validation_error(path, exc) from exc


def load_model(path: str | Path, model: type[M]) -> tuple[M, str]:
    """Read, parse and validate a file; returns the model and the file's SHA-256."""
    data, raw = read_json(path)
    return validate_doc(path, model, raw), sha256_hex(data)
