"""Options declared once, as the profiler declares its own: a frozen dataclass whose fields carry
their typer declaration (``Annotated[int, typer.Option("--flag", help=...)]``) and default.

``declared(func, group=Options, ...)`` is ``func`` as typer reads it: ``func``'s own parameters,
then every field of each group. typer hands the values over; ``func`` gets each group built once,
one object per group, under the group's name. Two commands that share a group (``run`` and
``edge`` share the client's options) declare it once and build it the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints


def declared(func: Callable[..., None], **groups: type[Any]) -> Callable[..., None]:
    """``func`` with each keyword parameter named in ``groups`` spread into its dataclass's
    fields for typer, and gathered back into one instance of it for ``func``."""
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(func, eval_str=True).parameters.values()
        if p.name not in groups
    ]
    spread: dict[str, tuple[str, ...]] = {}
    extra: list[inspect.Parameter] = []
    for name, group in groups.items():
        hints = get_type_hints(group, include_extras=True)
        spread[name] = tuple(f.name for f in dataclasses.fields(group))
        extra.extend(
            inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
                annotation=hints[f.name],
            )
            for f in dataclasses.fields(group)
        )
    names = [p.name for p in (*own, *extra)]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise TypeError(f"{func.__name__}: an option is declared twice: {', '.join(twice)}")

    @functools.wraps(func)
    def command(**given: Any) -> None:
        built = {
            name: groups[name](**{field: given.pop(field) for field in names})
            for name, names in spread.items()
        }
        func(**given, **built)

    command.__signature__ = inspect.Signature([*own, *extra])  # type: ignore[attr-defined]
    command.__annotations__ = {}
    return command
