"""Shared plumbing of the self-checking scenario scripts: a store path and a check()."""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import memory_lakehouse as ml


class SimClock:
    """A simulated store clock so a story can run over days in a second."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def set(self, when: datetime) -> None:
        self.now = when


def parse_store(description: str) -> str:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--store", help="store path (default: a fresh temporary directory)")
    args = parser.parse_args()
    return args.store or tempfile.mkdtemp(prefix="memlake-scenario-")


class Checks:
    def __init__(self, name: str) -> None:
        self.name = name
        self.failed = 0

    def __call__(self, label: str, ok: bool, detail: str = "") -> None:
        mark = "ok  " if ok else "FAIL"
        print(f"  [{mark}] {label}" + (f" — {detail}" if detail else ""))
        if not ok:
            self.failed += 1

    def finish(self) -> None:
        if self.failed:
            print(f"{self.name}: {self.failed} check(s) failed")
            sys.exit(1)
        print(f"{self.name}: all checks passed")


def value_of(record: ml.Fact | ml.Preference | None) -> Any:
    """The value a `get_fact` read found, or None when it found nothing (a check fails, not the script)."""
    return None if record is None else record.value


__all__ = ["SimClock", "parse_store", "Checks", "UTC", "datetime", "timedelta", "value_of"]


def attempt(label: str, fn):
    """Run an action that may be refused; print and return the store's error (or None)."""
    import memory_lakehouse as ml

    try:
        result = fn()
    except ml.LakehouseError as err:
        print(f"   {label}: refused ({type(err).__name__}) — {err}")
        return err
    print(f"   {label}: allowed — {result}")
    return None
