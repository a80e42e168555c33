"""Deliberately broken stores: each eval must fail on at least one of them.

Each wrapper delegates to a real store and breaks one promise, the way a real memory
would get it wrong:

- `IgnoresAsOf`: every read is answered as of now (``as_of``, ``known_at`` and
  ``valid_at`` dropped; replays run the time-blind query);
- `ServesEveryVersion`: reads also serve every earlier version of a slot it wrote,
  and ``get_fact`` answers with the first version ever written;
- `SkipsTombstones`: ``forget`` writes no tombstone (and a purge finds nothing to erase);
- `WidensScope`: a read is answered as every principal that ever wrote, merged;
- `DropsProvenance`: served records lose their source and evidence.

They live here, not in the library, and only the tests use them
(``Context(wrap=IgnoresAsOf)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import memory_lakehouse as ml

BASIS = ("as_of", "known_at", "valid_at")


class _Proxy:
    """Delegates every attribute to the wrapped store; remembers what was written through it."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._written: list[tuple[ml.Envelope, str, ml.Principal, ml.Scope | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def write(self, record: ml.Envelope, **kwargs: Any) -> Any:
        result = self._store.write(record, **kwargs)
        self._written.append((record, result.record_id, kwargs["by"], kwargs.get("scope")))
        return result

    def write_many(self, records: Sequence[ml.Envelope], **kwargs: Any) -> Any:
        result = self._store.write_many(records, **kwargs)
        for record, res in zip(records, result, strict=True):
            self._written.append((record, res.record_id, kwargs["by"], kwargs.get("scope")))
        return result


class IgnoresAsOf(_Proxy):
    def recall(self, query: str, **kwargs: Any) -> Any:
        return self._store.recall(query, **{k: v for k, v in kwargs.items() if k not in BASIS})

    def get_fact(self, subject: str, attribute: str, **kwargs: Any) -> Any:
        return self._store.get_fact(subject, attribute, **{k: v for k, v in kwargs.items() if k not in BASIS})

    def episodes(self, **kwargs: Any) -> Any:
        return self._store.episodes(**{k: v for k, v in kwargs.items() if k not in BASIS})

    def replay(self, decisions: Any, **kwargs: Any) -> Any:
        return self._store.replay(decisions, **{**kwargs, "naive": True})

    def resolve_policy(self, facts: Any, **kwargs: Any) -> Any:
        return self._store.resolve_policy(facts, **{k: v for k, v in kwargs.items() if k != "known_at"})


def _slot(record: ml.Envelope) -> tuple[str, str, str] | None:
    if isinstance(record, (ml.Fact, ml.Preference)):
        return record.kind, record.subject_name.casefold(), str(record.attribute).casefold()
    return None


@dataclass(frozen=True)
class _Hit:
    """A hit made up by a broken store (shaped like `ml.Hit`)."""

    record: ml.Envelope
    score: float
    why: tuple[str, ...]
    kind: str
    text: str

    @property
    def record_id(self) -> str:
        return self.record.record_id or ""


class ServesEveryVersion(_Proxy):
    def _versions(self, slot: tuple[str, str, str]) -> list[ml.Envelope]:
        return [r.replace(record_id=rid) for r, rid, _, _ in self._written if _slot(r) == slot]

    def recall(self, query: str, **kwargs: Any) -> Any:
        hits = list(self._store.recall(query, **kwargs))
        seen = {h.record_id for h in hits}
        for h in list(hits):
            slot = _slot(h.record)
            for old in self._versions(slot) if slot else []:
                if old.record_id not in seen:
                    seen.add(old.record_id)
                    hits.append(_Hit(old, h.score, ("every version",), old.kind, str(getattr(old, "value", ""))))
        return hits

    def get_fact(self, subject: str, attribute: str, **kwargs: Any) -> Any:
        current = self._store.get_fact(subject, attribute, **kwargs)
        if current is None:
            return None
        versions = self._versions(
            ("fact" if kwargs.get("kind", "fact") == "fact" else "preference", subject.casefold(), attribute.casefold())
        )
        return versions[0] if versions else current


class SkipsTombstones(_Proxy):
    def forget(self, subject: str, **kwargs: Any) -> Any:
        return None

    def purge(self, **kwargs: Any) -> Any:
        return self._store.purge(**{**kwargs, "dry_run": True})


class WidensScope(_Proxy):
    def _principals(self, by: ml.Principal) -> list[ml.Principal]:
        scopes = {by.scope} | {
            (scope or who.scope) for _, _, who, scope in self._written if (scope or who.scope).org == by.scope.org
        }
        return [by] + [ml.Principal(by.id, s, role=by.role) for s in sorted(scopes, key=str) if s != by.scope]

    def recall(self, query: str, **kwargs: Any) -> Any:
        hits: dict[str, Any] = {}
        for who in self._principals(kwargs["by"]):
            for h in self._store.recall(query, **{**kwargs, "by": who}):
                hits.setdefault(h.record_id, h)
        return sorted(hits.values(), key=lambda h: -h.score)[: kwargs.get("k", 8)]

    def get_fact(self, subject: str, attribute: str, **kwargs: Any) -> Any:
        for who in self._principals(kwargs["by"])[::-1]:  # the widest reader last written wins
            fact = self._store.get_fact(subject, attribute, **{**kwargs, "by": who})
            if fact is not None:
                return fact
        return None

    def resolve_policy(self, facts: Any, **kwargs: Any) -> Any:
        return self._store.resolve_policy(facts, **{**kwargs, "by": self._principals(kwargs["by"])[-1]})


class DropsProvenance(_Proxy):
    def recall(self, query: str, **kwargs: Any) -> Any:
        return [
            _Hit(h.record.replace(source="", evidence=None), h.score, h.why, h.kind, h.text)
            for h in self._store.recall(query, **kwargs)
        ]

    def get_fact(self, subject: str, attribute: str, **kwargs: Any) -> Any:
        fact = self._store.get_fact(subject, attribute, **kwargs)
        return None if fact is None else fact.replace(source="", evidence=None)


BROKEN: dict[str, type[_Proxy]] = {
    "ignores_as_of": IgnoresAsOf,
    "serves_every_version": ServesEveryVersion,
    "skips_tombstones": SkipsTombstones,
    "widens_scope": WidensScope,
    "drops_provenance": DropsProvenance,
}
