"""Record a model-based run's store calls, replay them on a fresh store, and shrink a
failure to the few calls that cause it.

Hypothesis often cannot shrink a failure of tests/test_model_based.py: examples share a
store (`_model.StoreFactory`), so replaying one case on the store as it is then draws
differently ("Inconsistent data generation"). The calls themselves replay exactly. Set
``MEMLAKE_MODEL_RECORD=/some/file.pkl`` and run the model test: every store call since
the current store was made is kept (with the clock at the call), and the first failed
read saves them. Then::

    python tests/_recording.py /some/file.pkl

replays them on a fresh store and removes calls (delta debugging) while the last read
on the long-lived handle still differs from the same read through a fresh handle,
which remembers nothing: the failure of a cache or fast path. It prints what is left.
Record ids are random: a replay maps each recorded id to the one its write returns now.
Stores are opened with the options the recording saved (`StoreFactory.store_options`).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import memory_lakehouse as ml

#: The store's calls a run records: what changes the store, and what reads it.
WRITES = ("write", "write_many", "propose", "approve", "retract", "forget", "purge")
READS = ("recall", "get_fact", "context", "replay")


@dataclasses.dataclass
class Call:
    handle: str  # "main" (the shared handle) or "freshN" (a handle opened without a cache)
    name: str  # a method of the store, "open" or "close"
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    now: datetime  # the store clock at the call
    result: Any = None  # reads: what they returned (`answer`); writes: the record ids written


def answer(name: str, result: Any) -> Any:
    """A read's result in a form to compare: ids, or the context's text."""
    if name == "recall":
        return sorted(h.record.record_id for h in result)
    if name == "get_fact":
        return None if result is None else result.record_id
    if name == "replay":
        visible = result.visible
        return sorted(
            zip(visible.column("decision_id").to_pylist(), visible.column("record_id").to_pylist(), strict=True)
        )
    return result


def written_ids(result: Any) -> list[str]:
    """The record ids a write returned, in order (a batch's results, or one result)."""
    results = getattr(result, "results", None)
    if results is not None:
        return [r.record_id for r in results]
    record_id = getattr(result, "record_id", None)
    return [record_id] if record_id is not None else []


class RecordingStore:
    """A store handle that appends each of its calls to a `Recording` and passes it on."""

    def __init__(self, store: ml.MemoryStore, recording: Recording, handle: str) -> None:
        self._store, self._recording, self._handle = store, recording, handle

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in WRITES + READS + ("close",):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            entry = Call(self._handle, name, args, kwargs, self._recording.clock())
            self._recording.calls.append(entry)  # before the call: one that raises is replayed too
            result = attr(*args, **kwargs)
            entry.result = answer(name, result) if name in READS else written_ids(result)
            return result

        return call


class Recording:
    """The calls on one store since it was made, saved once, at the first failed read."""

    def __init__(self, path: str, clock: Callable[[], datetime]) -> None:
        self.path, self.clock = path, clock
        self.calls: list[Call] = []
        self.open_options: dict[str, Any] = {}
        self.handles = 0
        self.saved = False

    def restart(self, open_options: dict[str, Any]) -> None:
        """A new store: what came before cannot matter to it."""
        self.calls, self.open_options, self.handles = [], dict(open_options), 0

    def wrap(self, store: ml.MemoryStore, handle: str | None = None) -> Any:
        if handle is None:  # another handle on the store: its opening is a call too
            self.handles += 1
            handle = f"fresh{self.handles}"
            self.calls.append(Call(handle, "open", (), {}, self.clock()))
        return RecordingStore(store, self, handle)

    def save(self) -> None:
        if not self.saved:
            self.saved = True
            with open(self.path, "wb") as f:
                pickle.dump({"calls": self.calls, "open_options": self.open_options}, f)
            print(f"\nrecorded {len(self.calls)} store calls to {self.path}", file=sys.stderr)


def _mapped(value: Any, ids: dict[str, str]) -> Any:
    """*value* with every recorded record id replaced by the one the replay wrote."""
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, tuple):
        return tuple(_mapped(v, ids) for v in value)
    if isinstance(value, list):
        return [_mapped(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _mapped(v, ids) for k, v in value.items()}
    return value


def _outcome(store: ml.MemoryStore, call: Call, ids: dict[str, str]) -> tuple[Any, Any]:
    """*call* run on *store* with the replay's ids: its result, and what `replay` compares
    (a read's `answer`; the name of the store's error if it raised; None otherwise)."""
    try:
        result = getattr(store, call.name)(*_mapped(call.args, ids), **_mapped(call.kwargs, ids))
    except ml.LakehouseError as e:
        return None, type(e).__name__
    return result, answer(call.name, result) if call.name in READS else None


def replay(calls: Sequence[Call], open_options: dict[str, Any], keep: Sequence[int]) -> bool:
    """Run the calls numbered *keep* (the last one a read) on a fresh store opened with
    *open_options* (the recording's, its embedder among them); True when that read on the
    long-lived handle differs from the same read through a fresh handle."""
    clock = {"now": calls[keep[0]].now}
    root = tempfile.mkdtemp(prefix="memlake-replay-")

    def opened(create: bool) -> ml.MemoryStore:
        return ml.open(
            os.path.join(root, "store"),
            clock=lambda: clock["now"],
            create=create,
            **open_options,
        )

    handles = {"main": opened(True)}
    ids: dict[str, str] = {}
    got: Any = None
    try:
        for i in keep:
            call = calls[i]
            clock["now"] = call.now
            if call.name == "open":
                handles[call.handle] = opened(False)
                continue
            store = handles.get(call.handle)
            if store is None:
                continue  # its handle's opening was removed
            result, outcome = _outcome(store, call, ids)
            if call.name in READS:
                got = outcome
            elif outcome is None and call.name == "close":
                del handles[call.handle]
            elif outcome is None:  # a write: its ids as this replay wrote them
                ids.update(zip(call.result or [], written_ids(result), strict=False))
        fresh = opened(False)
        try:
            _, expected = _outcome(fresh, calls[keep[-1]], ids)
        finally:
            fresh.close()
        return bool(got != expected)
    finally:
        for store in handles.values():
            store.close()
        shutil.rmtree(root, ignore_errors=True)


def shrink(calls: Sequence[Call], open_options: dict[str, Any], *, say: Callable[[str], None] = print) -> list[int]:
    """The calls, fewer (Zeller's ddmin over all but the last), for which `replay` still fails."""
    last = len(calls) - 1
    body = list(range(last))
    parts = 2
    while len(body) >= 2:
        size = max(1, len(body) // parts)
        for start in range(0, len(body), size):
            dropped = set(body[start : start + size])
            rest = [i for i in body if i not in dropped]
            if replay(calls, open_options, rest + [last]):
                body, parts = rest, max(parts - 1, 2)
                say(f"{len(body) + 1} calls still fail")
                break
        else:
            if parts >= len(body):
                break
            parts = min(len(body), 2 * parts)
    return body + [last]


def main(path: str) -> int:
    with open(path, "rb") as f:
        saved = pickle.load(f)
    calls, options = saved["calls"], saved["open_options"]
    everything = list(range(len(calls)))
    if not replay(calls, options, everything):
        print(f"{len(calls)} calls replayed: the last read agrees with a fresh handle (not a cache's failure)")
        return 1
    print(f"{len(calls)} calls replayed: the last read differs from a fresh handle's; shrinking")
    for i in shrink(calls, options):
        c = calls[i]
        print(f"[{i}] {c.now.isoformat()} {c.handle}.{c.name}{c.args} {c.kwargs} -> {c.result}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
