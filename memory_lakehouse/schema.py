"""Each record kind's JSON fields, generated from its dataclass in `records.py`.

What `memlake write` and `memlake propose` accept (`records.from_dict`): datetimes as
ISO-8601 strings with an offset, ``scope`` as a path (``acme/support``), tuples as
lists, a ``ttl`` as ``ttl_seconds``. Fields the store fills in are left out.
"""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime, timedelta
from typing import Any

from .errors import ValidationError
from .records import KINDS, SPECS

#: Set by the store on write, present on records read back: never part of the input.
STORE_FIELDS = frozenset({"record_id", "lineage_id", "status", "txn_id", "known_since"})

#: Envelope fields the write path (`write.Writer`) refuses to go without, per kind; the
#: dataclasses give them defaults so records can be built first. tests/test_cli_schema.py
#: checks each entry against the write path.
WRITE_REQUIRED: dict[str, frozenset[str]] = {
    "source": frozenset(KINDS) - {"note"},  # a note's source defaults to "session"
    "evidence": frozenset({"episode"}),
}


def _type_name(tp: Any) -> str:
    """A JSON-ish name for a dataclass field's annotation."""
    if tp is Any:
        return "any JSON value"
    origin = typing.get_origin(tp)
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        return " | ".join(_type_name(a) for a in args)
    if origin in (tuple, list) or tp in (tuple, list):
        inner = _type_name(args[0]) if args else "any"
        return f"list of {inner}"
    if origin in (dict, typing.Mapping) or (origin is not None and getattr(origin, "__name__", "") == "Mapping"):
        return "object"
    return {
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        datetime: "datetime (ISO 8601 with offset)",
        timedelta: "number (seconds)",
    }.get(tp, getattr(tp, "__name__", str(tp)))


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, tuple):
        return list(value)
    return value


def kind_fields(kind: str) -> list[dict[str, Any]]:
    """The JSON fields of *kind*: name, type, required, default — required first.

    >>> [f["name"] for f in kind_fields("fact") if f["required"]]
    ['source', 'subject', 'attribute', 'value', 'valid_from']
    """
    if kind not in SPECS:
        raise ValidationError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}", field="kind")
    cls = SPECS[kind].cls
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name in STORE_FIELDS:
            continue
        required = (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING) or (
            kind in WRITE_REQUIRED.get(f.name, ())
        )
        name, tp = f.name, _type_name(hints.get(f.name, Any))
        if f.name == "ttl":
            name = "ttl_seconds"
        elif f.name == "scope":
            tp = "string (scope path org/division/team/actor; default: the writer's scope)"
        out.append({"name": name, "type": tp, "required": required, "default": None if required else _default(f)})
    return sorted(out, key=lambda x: not x["required"])


def schemas() -> dict[str, list[dict[str, Any]]]:
    """Every kind's fields (`kind_fields`), by kind."""
    return {kind: kind_fields(kind) for kind in KINDS}
