"""Recall's incremental structures, caught up by batches that bring several new teams, actors
and subjects at once: the org's position map (`candidates.OrgRows`: labels and documents
of appended rows, the reverse maps recall places its hits by), the index partition a
catch-up embeds rows into (`Retriever.sync`), and BM25's rows newer than the org's model
(`Bm25.scores_of`, rebuilt past `BM25_STALE_SHARE`).

Why: the slot heads (`heads.OrgHeads`) once coded two new scopes of one catch-up alike, and
the randomised tests missed it because they wrote one record between reads at a fixed set
of scopes. These stores are written in batches of 1-5 records (sometimes two batches
before a read, once a backfill of 40), many at scopes and subjects no row had yet, with a
compaction and a forget and purge on the way, and read after each by a reader of every
scope seen; the write catches the structures up, or the next read does. Each
answer is compared with an oracle that shares none of those structures: the per-reader
visibility query (no heads, no remembered result), each visible row's own search text
embedded afresh (the cosine) or scored under the org model's statistics one row at a
time (BM25), and a fresh handle that builds every cache from scratch. Each test also
asserts that the incremental path it is about ran, so none can pass vacuously.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memory_lakehouse as ml
from memory_lakehouse.candidates import OrgRows, indexable_mask
from memory_lakehouse.query import bases_table
from memory_lakehouse.records import SPECS
from memory_lakehouse.retrieve import BM25_STALE_SHARE, INDEXED_KINDS

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EMBEDDER = ml.HashingEmbedder()
ORGS = ("acme", "globex")
#: What the batches write (recall reads every memory kind by default; these hold the rows).
WRITTEN_KINDS = ("fact", "preference", "reference")
#: Words the rows share: a query of one or two matches some rows of many scopes, not all.
VOCAB = ("okta", "invoice", "refund", "latency", "saml", "renewal", "export", "seats", "billing", "outage", "webhook")
ATTRIBUTES = ("plan", "tier", "region")
#: Seeds, each with who takes a write's rows into what reads built: the next read, or the write
#: itself (``ml.open(catch_up=...)``; a write of more rows than `catch_up.CATCH_UP_ROWS` leaves them to the read).
STORIES = [(3, "read"), (42, "write")]
#: Steps of batches and reads per story; a compaction and a forget-and-purge fall among them.
STEPS = 12

_SIGNAL = re.compile(r"(vector|bm25-new|bm25) #(\d+) \((-?\d+\.\d+)\)")
_FUSED = re.compile(r"cosine (-?\d+\.\d+), lexical coverage (\d+\.\d+)")
_ADDED = re.compile(r"index acme: added (\d+) row\(s\) newer than the partition")
_NEWER = re.compile(r"ranked lists: .*bm25-new=(\d+)")


@dataclass(frozen=True)
class _Row:
    """A visible row as the oracle sees it: its kind, search text and scope."""

    kind: str
    text: str
    scope: ml.Scope


class _Story:
    """A store written to in batches, many records at scopes and subjects no row had yet.

    Seeds each org, then each `step` writes one batch (or two before the next read),
    1-5 records each at a new actor in a team seen, a new team, a new division, the org's
    or a division's own scope, or a scope seen; about a new subject or one seen (a fact or
    preference of a subject seen may supersede its slot). Every record's text holds two
    shared words and a word of its own.
    """

    def __init__(self, root: Path, seed: int, mode: str) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.now = T0 + timedelta(days=10)
        self.store = ml.open(root, clock=self.clock, embedder=EMBEDDER, catch_up=mode)
        self.scopes: dict[str, list[ml.Scope]] = {
            org: [ml.Scope(org), ml.Scope(org, "support"), ml.Scope(org, "support", "t0"), ml.Scope(org, "sales")]
            for org in ORGS
        }
        self.subjects: dict[str, list[str]] = {org: [f"user:{i}" for i in range(4)] for org in ORGS}
        self.stewards = {org: ml.Principal(f"dpo-{org}", ml.Scope(org), role="steward") for org in ORGS}
        self.words: list[str] = []  # each record's own word, in the order written
        self.written = 0
        self.backfill_at = self.rng.randrange(1, STEPS // 2)
        self.compact_at = self.rng.randrange(3, STEPS // 2)
        self.purge_at = self.rng.randrange(STEPS // 2, STEPS - 3)

    def clock(self) -> datetime:
        return self.now

    def seed(self, rows: dict[str, int]) -> None:
        for org, n in rows.items():
            scopes = self.scopes[org]  # spread over them, a quarter at the org's own
            batch = [self._record(org, scopes[i % len(scopes)], set()) for i in range(n)]
            self.store.write_many(batch, by=self.stewards[org])

    def _scope(self, org: str, step: int) -> ml.Scope:
        scopes = self.scopes[org]
        roll = self.rng.random()
        if roll < 0.3:  # an actor no row had yet, in a team seen
            team = self.rng.choice([s for s in scopes if s.team is not None])
            scope = ml.Scope(org, team.division, team.team, f"a{step}x{len(scopes)}")
        elif roll < 0.45:  # a team no row had yet
            scope = ml.Scope(org, self.rng.choice(["support", "sales"]), f"t{step}x{len(scopes)}")
        elif roll < 0.5:  # a division no row had yet
            scope = ml.Scope(org, f"d{step}x{len(scopes)}")
        elif roll < 0.7:  # the org's or a division's: seen by many readers
            scope = self.rng.choice(scopes[:2])
        else:
            scope = self.rng.choice(scopes)
        scopes.append(scope)
        return scope

    def _kind(self) -> str:
        roll = self.rng.random()
        return "reference" if roll < 0.15 else "preference" if roll < 0.3 else "fact"

    def _record(self, org: str, scope: ml.Scope, slots: set[tuple[str, str]], kind: str | None = None) -> ml.Envelope:
        """One record of *kind* (default: drawn) at *scope*; *slots* are the (subject, attribute)
        pairs its batch holds already."""
        kind = kind or self._kind()
        own = f"zq{self.written}"
        self.written += 1
        self.words.append(own)
        text = " ".join([*self.rng.sample(VOCAB, 2), own])
        if self.rng.random() < 0.4:
            subject = f"user:{org}{self.written}"  # a subject no row had yet
            self.subjects[org].append(subject)
        else:
            subject = self.rng.choice(self.subjects[org])
        if kind == "reference":
            return ml.Reference(f"kb://{own}", f"guide {own}", text, T0, source="kb", scope=scope, subject=subject)
        attribute = self.rng.choice([a for a in ATTRIBUTES if (subject, a) not in slots] or ["note"])
        slots.add((subject, attribute))
        if kind == "preference":
            return ml.Preference(subject, attribute, text, T0, source="crm", scope=scope)
        return ml.Fact(subject, attribute, text, T0, source="crm", scope=scope)

    def step(self, step: int) -> None:
        """One or two batches (the second before any read), then the step's compaction or purge;
        once, a backfill of 40 rows at a dozen new scopes (more than a write catches up).

        Most batches hold one kind: their rows are appended to the kind's snapshot. A batch of
        several kinds is a transaction over their tables, and the rows of the first table
        written join the snapshot when it completes, in a new epoch (positions may move), which
        every structure takes by reading the kind again."""
        for _ in range(2 if self.rng.random() < 0.3 else 1):
            self.now += timedelta(minutes=self.rng.randrange(1, 30))
            org = "globex" if self.rng.random() < 0.25 else "acme"
            kind = self._kind() if self.rng.random() < 0.75 else None  # None: each record's own
            slots: set[tuple[str, str]] = set()
            batch = [self._record(org, self._scope(org, step), slots, kind) for _ in range(self.rng.randrange(1, 6))]
            self.store.write_many(batch, by=self.stewards[org])
        if step == self.backfill_at:
            self.now += timedelta(minutes=1)
            scopes = [self._scope("acme", step) for _ in range(12)]
            slots = set()
            batch = [self._record("acme", self.rng.choice(scopes), slots) for _ in range(40)]
            self.store.write_many(batch, by=self.stewards["acme"])
        if step == self.compact_at:
            self.store.maintenance.compact()  # a new epoch: positions move
        if step == self.purge_at:
            self.now += timedelta(minutes=1)
            self.store.forget(self.rng.choice(self.subjects["acme"][:4]), by=self.stewards["acme"], reason="erasure")
            self.store.purge(by=self.stewards["acme"])  # rows rewritten away, the partition rebuilt

    def readers(self, org: str) -> list[ml.Principal]:
        """A member at every scope seen, and one at a scope no row has."""
        scopes = [*dict.fromkeys(self.scopes[org]), ml.Scope(org, "support", "t9", "zed")]
        return [ml.Principal(f"r{i}", scope, role="member") for i, scope in enumerate(scopes)]

    def query(self) -> str:
        """Shared words, or shared words and the own words of rows just written."""
        words = self.rng.sample(VOCAB, self.rng.randrange(1, 3))
        if self.rng.random() < 0.6:
            words += self.rng.sample(self.words[-8:], 2)
        return " ".join(words)

    def fresh(self, name: str) -> ml.MemoryStore:
        """Another handle on the store, building every cache from scratch: its index in a root
        of its own (so it neither loads nor writes the long-lived handle's partitions)."""
        store = ml.open(self.root, clock=self.clock, embedder=EMBEDDER)
        store.retriever._index_root = self.root.parent / f"oracle-index-{name}"
        return store


def _visible(store: ml.MemoryStore, reads: Sequence[tuple[ml.Principal, str | None]]) -> list[dict[str, _Row]]:
    """The oracle's visible set of each read (a reader and a subject or None): the visibility
    query for all of them at once, straight (no heads, no remembered result), with each
    row's search text and scope."""
    out: list[dict[str, _Row]] = [{} for _ in reads]
    basis = store._basis()
    bases = bases_table([(str(i), who, basis, subject) for i, (who, subject) in enumerate(reads)])
    for kind in WRITTEN_KINDS:
        rows = store.vis.visible(kind, bases)
        if not rows.num_rows:
            continue
        texts = SPECS[kind].search_text(rows).to_pylist()
        columns = ["decision_id", "record_id", "org", "division", "team", "actor"]
        for row, text in zip(rows.select(columns).to_pylist(), texts, strict=True):
            levels = [row[level] for level in ("org", "division", "team", "actor") if row[level]]
            out[int(row["decision_id"])][row["record_id"]] = _Row(kind, text, ml.Scope(*levels))
    return out


def _check_hits(who: ml.Principal, hits: Sequence[ml.Hit], visible: dict[str, _Row], context: Any) -> None:
    """Recall returned exactly the visible rows, none twice, none outside the reader's scope."""
    assert sorted(h.record_id for h in hits) == sorted(visible), context
    for hit in hits:
        row = visible[hit.record_id]
        assert (hit.kind, hit.text, hit.record.scope) == (row.kind, row.text, row.scope), context
        assert hit.record.scope is not None and who.can_read(hit.record.scope), context


def _check_reasons(store: ml.MemoryStore, org: str, query: str, hits: Sequence[ml.Hit], context: Any) -> None:
    """Each hit was scored as its own row: the cosine and the BM25 score its ``why`` names are
    what its own search text scores (a row placed at another's label or document carries
    that row's scores, the visible set unchanged)."""
    model = store.retriever._orgs[org].bm25
    cosines = _cosines(query, {h.record_id: h.text for h in hits})
    for hit in hits:
        why = "; ".join(hit.why)
        for name, (_, score) in _signals(hit).items():
            if name == "vector":
                assert score == pytest.approx(cosines[hit.record_id], abs=6e-4), (context, hit.record_id, name)
            else:
                assert model is not None
                expected = float(model.scores_of(query, [hit.text])[0])
                assert score == pytest.approx(expected, abs=1.1e-3), (context, hit.record_id, name)
        for cosine, _ in _FUSED.findall(why):
            assert float(cosine) == pytest.approx(cosines[hit.record_id], abs=6e-4), (context, hit.record_id)


def _signals(hit: ml.Hit) -> dict[str, tuple[int, float]]:
    """The ranked lists a hit's ``why`` names, with its rank and raw score in each."""
    return {name: (int(rank), float(score)) for name, rank, score in _SIGNAL.findall("; ".join(hit.why))}


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    out: np.ndarray = vectors / np.where(norms > 0, norms, 1.0)
    return out


def _cosines(query: str, texts: dict[str, str]) -> dict[str, float]:
    """Each row's cosine with the query, its search text (record id -> text) embedded afresh."""
    if not texts:
        return {}
    q = _unit(EMBEDDER.embed([query]))[0]
    vectors = _unit(EMBEDDER.embed(list(texts.values())))
    return dict(zip(texts, (vectors @ q).tolist(), strict=True))


def _indexable(store: ml.MemoryStore, org: str) -> dict[str, str]:
    """Record id -> search text of every row of *org* the index and BM25 should hold."""
    out: dict[str, str] = {}
    for kind in INDEXED_KINDS:
        rows = store.lake.all_rows(kind)
        rows = rows.filter(indexable_mask(rows, org))
        if rows.num_rows:
            out.update(
                zip(rows.column("record_id").to_pylist(), SPECS[kind].search_text(rows).to_pylist(), strict=True)
            )
    return out


def _assert_org_rows_agree(store: ml.MemoryStore, org: str) -> None:
    """The org's position map places every indexable row at the label and document its own id has,
    and the reverse maps, kept up entry by entry, are the ones built whole."""
    state = store.retriever._orgs.get(org)
    if state is None or state.rows is None:
        return
    rows, part, model_ids = state.rows, state.partition, state.bm25_ids
    # each row's label and document read back from the code order (not looked up as the map does)
    labels_of = {rid: i for i, rid in enumerate(part.record_ids())} if part is not None else {}
    docs_of = {rid: i for i, rid in enumerate(model_ids.values_at(range(len(model_ids))))} if model_ids else {}
    for code, kind in enumerate(rows.kinds):
        snapshot = store.lake.all_rows(kind)
        positions = np.flatnonzero(indexable_mask(snapshot, org).to_numpy(zero_copy_only=False))
        ids = snapshot.column("record_id").to_pylist()
        labels, docs = rows.locate(kind, positions)
        assert labels.tolist() == [labels_of.get(ids[p], -1) for p in positions], (org, kind)
        assert docs.tolist() == [docs_of.get(ids[p], -1) for p in positions], (org, kind)
        for by, targets in ((rows.by_label, labels), (rows.by_doc, docs)):
            held = targets >= 0
            assert (by[0][targets[held]] == code).all() and (by[1][targets[held]] == positions[held]).all(), kind
    for name, by in (("labels", rows.by_label), ("docs", rows.by_doc)):
        whole = rows._reverse(len(by[0]), name)
        assert np.array_equal(by[0], whole[0]) and np.array_equal(by[1], whole[1]), name


def _start(story: _Story) -> None:
    """Seed both orgs and read each once: the partitions, BM25 models and maps exist before the batches."""
    story.seed({"acme": 100, "globex": 12})
    for org in ORGS:
        assert story.store.recall("okta", by=story.readers(org)[0], k=3)


def _steps(story: _Story, lines: list[str]) -> Iterator[int]:
    """The story's steps, each yielded once its batches are written, every trace line into *lines*."""
    with story.store.tracer(lines.append):
        for step in range(STEPS):
            story.step(step)
            yield step


def _reads(story: _Story, org: str, *, subjects: bool = False) -> list[tuple[ml.Principal, str | None, str]]:
    """A read by every reader of *org*, in a random order: (reader, subject or None, query)."""
    readers = story.readers(org)
    story.rng.shuffle(readers)
    pick = subjects and story.rng.random() < 0.2
    return [(who, story.rng.choice(story.subjects[org]) if pick else None, story.query()) for who in readers]


@pytest.mark.parametrize(("seed", "mode"), STORIES)
def test_recall_after_batches_at_new_scopes_places_every_row_at_its_own_label_and_document(
    tmp_path, seed, mode, monkeypatch
):
    """`OrgRows.catch_up` after batches of several rows at new scopes (the rows appended with
    their labels and documents, or appended unlabelled by a BM25-only recall and labelled
    when the partition grows): every reader of every scope seen gets exactly its visible
    rows, each scored as its own row, under every signal; and the map agrees with the ids
    after every read."""
    story = _Story(tmp_path / "s", seed, mode)
    _start(story)
    grew: list[int] = []  # per catch-up of an epoch seen: the most rows appended to one kind's map
    kept: list[int] = []  # the same, where the reverse maps took the new entries (partition and model kept)
    labelled: list[int] = []  # per catch-up of an epoch seen: the most rows of one kind labelled as the partition grew
    catch_up = OrgRows.catch_up

    def counted(self: OrgRows, lake: Any, appended: Any, partition: Any, labels_of: Any, bm25: Any, docs_of: Any):
        both = partition is self._partition and bm25 is self._bm25
        before = {kind: (rows, len(rows.positions), int((rows.labels < 0).sum())) for kind, rows in self._rows.items()}
        catch_up(self, lake, appended, partition, labels_of, bm25, docs_of)
        same = [
            (rows, held, unlabelled) for kind, (rows, held, unlabelled) in before.items() if self._rows[kind] is rows
        ]
        if same:  # the same epoch: each kind's map was extended, not read again
            grew.append(max(len(rows.positions) - held for rows, held, _ in same))
            kept.append(grew[-1] if both else 0)
            if partition is self._partition:
                labelled.append(max(u - int((rows.labels[:held] < 0).sum()) for rows, held, u in same))

    monkeypatch.setattr(OrgRows, "catch_up", counted)
    signals: list[tuple[str, ...]] = [("bm25",), ("vector",), ("vector", "bm25")]
    for step in range(STEPS):
        story.step(step)
        for org in ORGS:
            reads = _reads(story, org, subjects=True)
            for i, ((who, subject, query), visible) in enumerate(
                zip(reads, _visible(story.store, [(who, subject) for who, subject, _ in reads]), strict=True)
            ):
                # the step's first read alternates: BM25 alone leaves rows the write did not catch up
                # unlabelled (the partition is not), and the next vector read labels them where they sit
                chosen = signals[step % 2 and step != story.backfill_at] if i == 0 else story.rng.choice(signals)
                hits = story.store.recall(query, by=who, k=1000, subject=subject, signals=chosen)
                context = (step, who.scope, subject, chosen, query)
                _check_hits(who, hits, visible, context)
                _check_reasons(story.store, org, query, hits, context)
                _assert_org_rows_agree(story.store, org)
    # the paths under test ran: maps extended by catch-ups of several rows of a kind (their reverse
    # maps entry by entry too), and several rows labelled at once when the partition grew under
    # the map (after the backfill, at least: a write catches up no more than `CATCH_UP_ROWS` rows)
    assert sum(n >= 2 for n in grew) >= 5, [n for n in grew if n]
    assert sum(n >= 2 for n in kept) >= 3, [n for n in kept if n]
    assert sum(n >= 2 for n in labelled) >= 1, [n for n in labelled if n]


@pytest.mark.parametrize(("seed", "mode"), STORIES)
def test_vector_recall_after_batches_caught_up_into_the_partition_scores_each_row_by_its_own_text(tmp_path, seed, mode):
    """`Retriever.sync` catching the partition up with batches of several rows at new scopes
    (laid out by scope, so not in the order written): every visible row is scored by its own
    search text's embedding, in order, as a fresh handle scores it; the partition holds every
    row of the org under its own vector, the newest included."""
    story = _Story(tmp_path / "s", seed, mode)
    _start(story)
    lines: list[str] = []
    for step in _steps(story, lines):
        asked: list[tuple[ml.Principal, str, list[ml.Hit]]] = []
        for org in ORGS:
            reads = _reads(story, org)
            for (who, _, query), visible in zip(
                reads, _visible(story.store, [(who, None) for who, _, _ in reads]), strict=True
            ):
                context = (step, who.scope, query)
                hits = story.store.recall(query, by=who, k=1000, signals=("vector",))
                _check_hits(who, hits, visible, context)
                expected = _cosines(query, {rid: row.text for rid, row in visible.items()})
                got = [_signals(h)["vector"] for h in hits]
                assert [rank for rank, _ in got] == list(range(1, len(hits) + 1)), context
                for hit, (_, cosine) in zip(hits, got, strict=True):
                    assert cosine == pytest.approx(expected[hit.record_id], abs=6e-4), (context, hit.record_id)
                ordered = [expected[h.record_id] for h in hits]
                assert all(a >= b - 1e-5 for a, b in zip(ordered, ordered[1:], strict=False)), context
                if story.rng.random() < 0.2:  # the search's own top k
                    top = story.store.recall(query, by=who, k=3, signals=("vector",))
                    best = sorted(expected.values(), reverse=True)[:3]
                    assert [expected.get(h.record_id) for h in top] == pytest.approx(best, abs=1e-5), context
                asked.append((who, query, hits))
            part = story.store.retriever._orgs[org].partition
            assert part is not None
            held = _indexable(story.store, org)
            assert sorted(held) == sorted(part.record_ids()), (step, org)  # every row, the newest included
            ids = list(held)
            vectors = _unit(part.vectors_of(ids))
            assert np.allclose(vectors, _unit(EMBEDDER.embed([held[r] for r in ids])), atol=1e-5), (step, org)
        if step % 2 == 0:
            continue
        fresh = story.fresh(str(step))  # every other step: every cache built from scratch
        try:
            for who, query, hits in story.rng.sample(asked, 6):
                again = fresh.recall(query, by=who, k=1000, signals=("vector",))
                theirs = {h.record_id: _signals(h)["vector"][1] for h in again}
                ours = {h.record_id: _signals(h)["vector"][1] for h in hits}
                assert ours.keys() == theirs.keys(), (step, who.scope, query)
                assert all(abs(ours[r] - theirs[r]) <= 1.1e-3 for r in ours), (step, who.scope, query)
        finally:
            fresh.close()
    # the path under test ran: catch-ups of several rows into a partition that held the org before
    added = [int(n) for n in _ADDED.findall("\n".join(lines))]
    assert sum(n >= 2 for n in added) >= 4, added


@pytest.mark.parametrize(("seed", "mode"), STORIES)
def test_bm25_recall_scores_rows_newer_than_the_model_as_the_model_scores_them(tmp_path, seed, mode):
    """Rows written since the org's BM25 model, several at new scopes in one batch, are ranked
    apart under the model's statistics (`Bm25.scores_of`): each visible row is scored as the
    model scores its own search text, in the model's list or the newer rows' list by whether
    the model holds it, its lexical coverage too; and the model is rebuilt once the newer
    rows pass `BM25_STALE_SHARE` of it."""
    story = _Story(tmp_path / "s", seed, mode)
    _start(story)
    lines: list[str] = []
    for step in _steps(story, lines):
        for org in ORGS:
            reads = _reads(story, org)
            for i, ((who, _, query), visible) in enumerate(
                zip(reads, _visible(story.store, [(who, None) for who, _, _ in reads]), strict=True)
            ):
                # every other step a read with vectors first: its catch-up keeps the new rows' texts
                fused = (i == 0 and step % 2 == 0) or story.rng.random() < 0.2
                signals = ("vector", "bm25") if fused else ("bm25",)
                context = (step, who.scope, signals, query)
                hits = story.store.recall(query, by=who, k=1000, signals=signals)
                _check_hits(who, hits, visible, context)
                state = story.store.retriever._orgs[org]
                model, held = state.bm25, state.bm25_ids
                assert model is not None and held is not None
                ranked: dict[str, list[tuple[int, float]]] = {"bm25": [], "bm25-new": []}
                for hit in hits:
                    text = visible[hit.record_id].text
                    expected = float(model.scores_of(query, [text])[0])  # the model's statistics, one row
                    lists = {n: s for n, s in _signals(hit).items() if n.startswith("bm25")}
                    if fused:
                        coverage = float(model.coverage_of(query, [text])[0])
                        assert float(_FUSED.findall("; ".join(hit.why))[0][1]) == pytest.approx(coverage, abs=6e-3)
                    if expected <= 0:
                        assert not lists, (context, hit.record_id)  # no word of the query: in no BM25 list
                        continue
                    name = "bm25" if hit.record_id in held else "bm25-new"
                    assert list(lists) == [name], (context, hit.record_id, lists)
                    rank, score = lists[name]
                    assert score == pytest.approx(expected, abs=1.1e-3), (context, hit.record_id)
                    ranked[name].append((rank, expected))
                for name, pairs in ranked.items():  # each list ranks all its rows, by score
                    pairs.sort()
                    assert [rank for rank, _ in pairs] == list(range(1, len(pairs) + 1)), (context, name)
                    scores = [score for _, score in pairs]
                    assert all(a >= b - 1e-4 for a, b in zip(scores, scores[1:], strict=False)), (context, name)
                # never staler than the share allows (`_bm25` counts the org's rows against it)
                newer = len(_indexable(story.store, org)) - model.size
                assert newer <= BM25_STALE_SHARE * max(1, model.size), (context, newer, model.size)
    # the paths under test ran: several newer rows ranked apart in one recall, and the model rebuilt
    text = "\n".join(lines)
    newer_lists = [int(n) for n in _NEWER.findall(text)]
    assert sum(n >= 2 for n in newer_lists) >= 5, newer_lists
    assert text.count("bm25 acme: built over") >= 2
