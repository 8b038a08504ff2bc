"""The fields of a JSON result file that the audit's models read, streamed: the rest is never built.

`vllm bench serve --save-detailed` adds per-request arrays (100,000 requests with their inter-token
latencies: ~120 MB of JSON, over 500 MB as Python lists); GuideLLM's report holds every request. Read
with ijson (yajl, in C), a value the models do not name is skipped where it lies; an object's other
keys are kept with None (the message on an unknown file names what it has).

ijson is strict JSON: NaN and Infinity (which Python's json writes), bytes that are not UTF-8 and broken
JSON raise its `JSONError`, for the caller to read such a file the standard way (results.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any, TypeAlias, cast, get_args, get_origin

import ijson
from pydantic import AliasChoices, AliasPath, BaseModel, Field

JSONError = ijson.JSONError

Keep: TypeAlias = "bool | dict[str | None, Keep]"
"""What to build of a value: True all of it, False none, a dict the keys it names (None: each item
of an array)."""

_OPEN = frozenset({"start_map", "start_array"})
_CLOSE = frozenset({"end_map", "end_array"})


def at(key: str, *path: str | int, default: Any = None) -> Any:
    """A field read from `key` and down `path` in the document (an int: that item of an array), for
    `wanted` to build that alone; `default=...`: required."""
    return Field(default, validation_alias=AliasPath(key, *path))


def wanted(model: type[BaseModel]) -> dict[str | None, Keep]:
    """The fields of `model` (by their JSON names, or the paths `at` and `AliasChoices` give), down
    through the models and lists of models they hold: a field of any other type is kept whole."""
    keep: dict[str | None, Keep] = {}
    for name, field in model.model_fields.items():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias or field.alias or name]
        for choice in choices:
            path = choice.path if isinstance(choice, AliasPath) else [choice]
            where = keep
            keys = [None if isinstance(step, int) else step for step in path]
            for key in keys[:-1]:
                where = cast(dict[str | None, Keep], where.setdefault(key, {}))
            where[keys[-1]] = _wanted(field.annotation)
    return keep


def _wanted(annotation: Any) -> Keep:
    for arg in (annotation, *get_args(annotation)):  # Model, Model | None, list[Model]
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return wanted(arg)
        if get_origin(arg) is list:
            item = _wanted(get_args(arg)[0])
            return True if item is True else {None: item}
    return True


def read_documents(fh: IO[bytes], keep: Keep) -> list[Any]:
    """The JSON values of `fh` (one, or several one after another: `--append-result`), each with only
    what `keep` names. Raises `JSONError` for anything ijson cannot read."""
    events = iter(ijson.basic_parse(fh, use_float=True, multiple_values=True))
    return [_value(events, event, value, keep) for event, value in events]


def _value(events: Iterator[tuple[str, Any]], event: str, value: Any, keep: Keep) -> Any:
    if event == "start_map":
        found: dict[str, Any] = {}
        for event, key in events:
            if event == "end_map":
                break
            sub = keep if isinstance(keep, bool) else keep.get(key, False)
            event, value = next(events)
            if sub:
                found[key] = _value(events, event, value, sub)
            else:
                found[key] = None
                _skip(events, event)
        return found
    if event == "start_array":
        sub = keep if isinstance(keep, bool) else keep.get(None, False)
        items = []
        for event, value in events:
            if event == "end_array":
                break
            if sub:
                items.append(_value(events, event, value, sub))
            else:
                _skip(events, event)
        return items
    return value


def _skip(events: Iterator[tuple[str, Any]], event: str) -> None:
    """Past the value that `event` begins, building nothing."""
    if event not in _OPEN:
        return
    depth = 1
    for event, _ in events:
        if event in _OPEN:
            depth += 1
        elif event in _CLOSE:
            depth -= 1
            if not depth:
                return
