"""A LangGraph `BaseStore` on a memory store: LangGraph agents get governed, bi-temporal memory.

    from memory_lakehouse.integrations.langgraph import LakehouseStore
    lg_store = LakehouseStore(ml.open("data/store"), by=alice)
    graph = builder.compile(store=lg_store)      # or pass it to create_react_agent(..., store=lg_store)

**Mapping.** An item ``(namespace, key) -> value`` is one `Fact` written through the one
write path: subject ``lg:<namespace labels joined by '/'>``, attribute the key, value
the dict (kept as JSON; the write path's redaction applies to it), source
``langgraph``. Labels and keys are escaped so the store's case-insensitive slots keep
LangGraph's case-sensitive names apart (``Key`` → ``^key``).

* **Scope.** With ``scope_levels=0`` (the default) every namespace lives at the
  principal's own scope (``scope=`` to pick another it may write), so two principals in
  sibling scopes using the same namespace never see each other's items — the store
  enforces it. With ``scope_levels=N`` the first *N* labels of a namespace *are* the
  scope path (``("acme", "support", "memories")`` with N = 2 lives at
  ``acme/support``): the principal reads what its scope may read there (its own scope
  and its ancestors'), and writes where its role may.
* ``put`` over an existing value supersedes it (history keeps the old version); an
  equal value is a duplicate (no new version). ``delete`` retracts every live version of
  the slot, so no older value comes back.
* ``search`` is `recall` over the items under the prefix, narrowed by ``filter``
  (LangGraph's operators: ``$eq $ne $gt $gte $lt $lte``) — a post-filter, applied after
  visibility; without a query, items come newest first. ``as_of=`` (an extension on
  `search`, `get` and `list_namespaces`) reads what the store knew at that time.
* ``created_at``/``updated_at`` are the current version's system time (as
  `InMemoryStore`, a put resets both). TTLs are not supported (``supports_ttl`` False).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..errors import ValidationError
from ..records import Envelope, Fact
from ..scope import Principal, Scope

SOURCE = "langgraph"
PREFIX = "lg:"

__all__ = ["LakehouseStore", "decode_label", "encode_label"]


def encode_label(text: str) -> str:
    """Escape a label so that case, '/' and edge spaces survive the store's slot normalisation.

    >>> encode_label("User/42"), decode_label(encode_label("User/42"))
    ('^user^s42', 'User/42')
    """
    out = []
    for i, ch in enumerate(text):
        if ch == "^":
            out.append("^^")
        elif ch == "/":
            out.append("^s")
        elif "A" <= ch <= "Z":
            out.append("^" + ch.lower())
        elif ch.casefold() != ch or not ch.isprintable() or (ch.isspace() and i in (0, len(text) - 1)):
            out.append(f"^{{{ord(ch):x}}}")
        else:
            out.append(ch)
    return "".join(out)


def decode_label(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "^":
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "^":
            out.append("^")
        elif nxt == "s":
            out.append("/")
        elif nxt == "{":
            end = text.index("}", i)
            out.append(chr(int(text[i + 2 : end], 16)))
            i = end + 1
            continue
        else:
            out.append(nxt.upper())
        i += 2
    return "".join(out)


class LakehouseStore(BaseStore):
    """LangGraph's store interface over `MemoryStore`, acting as one principal (see the module doc)."""

    supports_ttl = False

    def __init__(
        self, store: Any, *, by: Principal, scope: Scope | None = None, scope_levels: int = 0, source: str = SOURCE
    ) -> None:
        if not isinstance(by, Principal):
            raise ValidationError("by= must be a Principal", field="by")
        if not 0 <= scope_levels <= 4:
            raise ValidationError("scope_levels must be 0..4 (org, division, team, actor)", field="scope_levels")
        self.store = store
        self.by = by
        self.scope = scope or by.scope
        self.scope_levels = scope_levels
        self.source = source
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ mapping

    def subject_of(self, namespace: Sequence[str]) -> str:
        """The store subject holding a namespace's items (forget it to erase the namespace)."""
        return PREFIX + "/".join(encode_label(label) for label in namespace)

    def namespace_of(self, subject: str) -> tuple[str, ...]:
        body = subject[len(PREFIX) :]
        return tuple(decode_label(label) for label in body.split("/")) if body else ()

    def scope_of(self, namespace: Sequence[str]) -> Scope:
        if not self.scope_levels:
            return self.scope
        if len(namespace) < self.scope_levels:
            raise ValidationError(
                f"namespace {tuple(namespace)} needs at least {self.scope_levels} label(s) naming its scope",
                field="namespace",
            )
        return Scope(*namespace[: self.scope_levels])

    def _item(self, record: Envelope, score: float | None = None, *, search: bool = False) -> Item:
        assert isinstance(record, Fact)
        namespace = self.namespace_of(record.subject_name)
        key = decode_label(record.attribute)
        when = record.known_since
        assert when is not None  # read back from the store, which fills known_since
        value = dict(record.value or {})
        if search:
            return SearchItem(namespace, key, value, when, when, score)
        return Item(value=value, key=key, namespace=namespace, created_at=when, updated_at=when)

    def _search_item(self, record: Envelope, score: float | None = None) -> SearchItem:
        item = self._item(record, score, search=True)
        if not isinstance(item, SearchItem):  # _item(search=True) builds one
            raise TypeError("expected a SearchItem")
        return item

    # ------------------------------------------------------------------ batch

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Reads first (against the state before the batch, as `InMemoryStore`), then the writes."""
        return self._run(list(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self._run, list(ops))

    def _run(self, ops: list[Op], as_of: datetime | None = None) -> list[Result]:
        with self._lock:
            results: list[Result] = []
            puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(self._get(op.namespace, op.key, as_of))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, as_of))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op, as_of))
                elif isinstance(op, PutOp):
                    puts[(tuple(op.namespace), str(op.key))] = op
                    results.append(None)
                else:
                    raise ValidationError(f"unknown LangGraph operation {type(op).__name__}", field="op")
            self._apply(list(puts.values()))
            return results

    def _get(self, namespace: Sequence[str], key: str, as_of: datetime | None) -> Item | None:
        record = self.store.get_fact(self.subject_of(namespace), encode_label(key), by=self.by, as_of=as_of)
        if record is None or record.source != self.source:
            return None
        return self._item(record)

    def _visible(self, as_of: datetime | None) -> list[Envelope]:
        return [
            r
            for r in self.store.list(None, by=self.by, kinds=["fact"], filters={"source": self.source}, as_of=as_of)
            if r.subject_name.startswith(PREFIX)
        ]

    def _search(self, op: SearchOp, as_of: datetime | None) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        candidates = [
            r
            for r in self._visible(as_of)
            if self.namespace_of(r.subject_name)[: len(prefix)] == prefix
            and all(_matches(_value(r).get(k), v) for k, v in (op.filter or {}).items())
        ]
        if not op.query:
            candidates.sort(key=lambda r: (r.known_since, r.record_id), reverse=True)
            return [self._search_item(r) for r in candidates[op.offset : op.offset + op.limit]]
        allowed = {r.record_id: r for r in candidates}
        if not allowed:
            return []
        hits = self.store.recall(
            op.query,
            by=self.by,
            kinds=["fact"],
            filters={"source": self.source},
            k=max(1, len(self._visible(as_of))),
            as_of=as_of,
        )
        ranked = [(allowed[h.record_id], h.score) for h in hits if h.record_id in allowed]
        return [self._search_item(r, score) for r, score in ranked[op.offset : op.offset + op.limit]]

    def _list_namespaces(self, op: ListNamespacesOp, as_of: datetime | None) -> list[tuple[str, ...]]:
        namespaces = {self.namespace_of(r.subject_name) for r in self._visible(as_of)}
        if op.match_conditions:
            namespaces = {ns for ns in namespaces if all(_namespace_matches(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    def _apply(self, puts: Sequence[PutOp]) -> None:
        writes = [op for op in puts if op.value is not None]
        for op in puts:
            if op.value is None:
                self._delete(op.namespace, op.key)
        by_scope: dict[Scope, list[Fact]] = {}
        now = self.store.clock.peek()
        for op in writes:
            if not isinstance(op.value, Mapping):
                raise ValidationError("a LangGraph value must be a mapping", field="value")
            fact = Fact(self.subject_of(op.namespace), encode_label(op.key), dict(op.value), now, source=self.source)
            by_scope.setdefault(self.scope_of(op.namespace), []).append(fact)
        for scope, facts in by_scope.items():
            self.store.write_many(facts, by=self.by, scope=scope, reason="langgraph put")

    def _delete(self, namespace: Sequence[str], key: str) -> None:
        """Retract every live version of the slot (retracting only the head would bring the older one back)."""
        history = self.store.history(self.subject_of(namespace), encode_label(key), by=self.by)
        for version in history:
            if version.known_to is None and not version.retracted and version.record.source == self.source:
                self.store.retract(version.record_id, by=self.by, reason="langgraph delete")

    # ------------------------------------------------------------------ the basis extension

    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None, as_of: datetime | None = None
    ) -> Item | None:
        """`BaseStore.get`, plus ``as_of=``: the item as the store knew it then."""
        if as_of is None:
            return super().get(namespace, key, refresh_ttl=refresh_ttl)
        return self._run([GetOp(namespace, str(key))], as_of)[0]  # type: ignore[return-value]  # a GetOp's result is an Item or None

    def search(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
        as_of: datetime | None = None,
    ) -> list[SearchItem]:
        """`BaseStore.search`, plus ``as_of=``: recall as the store knew it then."""
        op = SearchOp(namespace_prefix, filter, limit, offset, query)
        return self._run([op], as_of)[0]  # type: ignore[return-value]  # a SearchOp's result is a list of SearchItem


def _value(record: Envelope) -> dict[str, Any]:
    return dict(record.value or {}) if isinstance(record, Fact) and isinstance(record.value, Mapping) else {}


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: exact (nested) match, or ``{"$op": x}`` comparisons."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_compare(value, op, x) for op, x in wanted.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_matches(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _compare(value: Any, op: str, x: Any) -> bool:
    if op == "$eq":
        return bool(value == x)
    if op == "$ne":
        return bool(value != x)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if value is None:
            return False
        a, b = float(value), float(x)
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValidationError(f"unsupported filter operator {op}", field="filter")


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    if condition.match_type not in ("prefix", "suffix"):
        raise ValidationError(f"unsupported match type {condition.match_type}", field="match_conditions")
    return all(p == "*" or n == p for n, p in pairs)
