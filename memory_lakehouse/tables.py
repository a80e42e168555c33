"""Results as tables: Arrow always, polars when it is installed (the ``polars`` extra)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .errors import StoreError


def to_polars(table: pa.Table) -> Any:
    """A polars DataFrame of an Arrow table (zero-copy where polars can)."""
    try:
        import polars as pl
    except ImportError as exc:
        raise StoreError("to_polars() needs polars: pip install 'memory-lakehouse[polars]'") from exc
    return pl.from_arrow(table)
