"""What text a record may carry: valid Unicode, and at most ``max_text_bytes`` per field.

The write path checks every field of a record after validation: each string, and each
structured field (a mapping or list value, a policy's conditions, ``derived_from``) as
the JSON the store keeps. A value bigger than the limit is refused, not cut: a 10 MB
value would be embedded (cut at 256 tokens), scanned by every BM25 pass and served
whole into prompts. A lone surrogate (``"\\udc80"``, from a bad decode) cannot be
stored as UTF-8 at all.

>>> check_text("value", "Enterprise Pro", 1024)
>>> check_text("value", "x" * 2000, 1024)
Traceback (most recent call last):
...
memory_lakehouse.errors.ValidationError: value is 2,000 bytes of UTF-8 text, over the limit of 1,024 bytes per field (max_text_bytes)
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from typing import Any

from .errors import ValidationError

#: The default limit: a long document section fits, a pasted log file does not.
DEFAULT_MAX_TEXT_BYTES = 64 * 1024


def check_limit(value: object) -> int:
    """*value* as a limit in bytes, or ValidationError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"max_text_bytes must be a positive int, got {value!r}", field="max_text_bytes")
    return value


def _check_str(name: str, text: str, limit: int) -> None:
    if text.isascii():  # O(1) in CPython: one byte per character
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ValidationError(
                f"{name} holds a lone surrogate ({text[exc.start]!r} at character {exc.start}): not valid Unicode text",
                field=name,
            ) from None
    if size > limit:
        raise ValidationError(
            f"{name} is {size:,} bytes of UTF-8 text, over the limit of {limit:,} bytes per field (max_text_bytes)",
            field=name,
        )


def check_text(name: str, value: Any, limit: int) -> None:
    """Raise ValidationError if *value* (a string, or a structure as its JSON) is not storable text."""
    if type(value) is str:
        if not (value.isascii() and len(value) <= limit):  # the common case costs two O(1) calls
            _check_str(name, value, limit)
    elif isinstance(value, (Mapping, list, tuple)) and value:
        try:
            encoded = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return  # not JSON at all: the record's own encoding refuses it, naming the field
        _check_str(name, encoded, limit)


_NOT_TEXT = ("datetime", "timedelta", "float", "int", "Scope", "bool")
_SET_BY_STORE = frozenset({"record_id", "lineage_id", "txn_id", "status", "known_since"})


@functools.cache
def text_fields(cls: type) -> tuple[str, ...]:
    """The fields of a record class that can hold text: strings, free values, mappings, id lists."""
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in _SET_BY_STORE and not any(t in str(f.type) for t in _NOT_TEXT)
    )


def check_record_text(record: Any, limit: int) -> None:
    """Raise ValidationError naming the first text field of *record* that is not storable text."""
    values = record.__dict__
    for name in text_fields(type(record)):  # type: ignore[arg-type]  # mypy does not take a class for Hashable
        value = values[name]
        if value is None or (type(value) is str and value.isascii() and len(value) <= limit):
            continue  # the common cases, without a call
        check_text(name, value, limit)
