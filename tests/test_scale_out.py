"""Scale-out: bulk replay fans out per org on an existing engine (Daft) and gets exactly the
answers of one `store.replay`; Daft reads the org-partitioned tables directly."""

from __future__ import annotations

import warnings
from datetime import timedelta

import pytest

import memory_lakehouse as ml
from memory_lakehouse.bench import ORGS, T0, _ManualClock, ingest

daft = pytest.importorskip("daft")

RECORDS = 1_200


def replay_decisions(records: int, count: int) -> list[tuple]:
    out = []
    for n in range(count):
        i = (n * 7919) % records
        org = ORGS[i % len(ORGS)]
        reader = ml.Principal(f"agent-{org}", ml.Scope(org, "support", f"team{i % 5}"), role="member")
        out.append((f"d{n}", reader, "", f"user:{i // 4}", T0 + timedelta(minutes=(n * 37) % (records + 120))))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale") / "store"
    clock = _ManualClock(T0)
    store = ml.open(root, clock=clock, embedder=ml.HashingEmbedder())
    ingest(store, RECORDS, batch=20, clock=clock)  # several windows: past bases see part of the store
    store.maintenance.record_commits()
    return store, str(root), clock


def test_a_per_org_fan_out_on_daft_replays_exactly_what_one_replay_does(built):
    store, root, clock = built
    batch = replay_decisions(RECORDS, 300)
    expected = {
        (r["decision_id"], r["record_id"])
        for r in store.replay(batch, kinds=["fact"]).visible.select(["decision_id", "record_id"]).to_pylist()
    }
    assert 0 < len(expected) < len(batch)  # some decisions came before what they asked about was known

    stores: dict[str, ml.MemoryStore] = {}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # @daft.udf is what map_groups takes today

        @daft.udf(return_dtype=daft.DataType.string())
        def replay_org(decision_id, org, division, team, subject, decided_at):  # one call per org
            s = stores.get(root) or stores.setdefault(
                root, ml.open(root, clock=clock, create=False, embedder=ml.HashingEmbedder())
            )
            rows = zip(
                decision_id.to_pylist(),
                org.to_pylist(),
                division.to_pylist(),
                team.to_pylist(),
                subject.to_pylist(),
                decided_at.to_pylist(),
                strict=True,
            )
            ds = [
                (d, ml.Principal(f"agent-{o}", ml.Scope(o, dv, t), role="member"), "", sub, at)
                for d, o, dv, t, sub, at in rows
            ]
            visible = s.replay(ds, kinds=["fact"]).visible
            return [
                f"{d}|{r}"
                for d, r in zip(
                    visible.column("decision_id").to_pylist(), visible.column("record_id").to_pylist(), strict=True
                )
            ]

    frame = daft.from_pydict(
        {
            "decision_id": [d[0] for d in batch],
            "org": [d[1].scope.org for d in batch],
            "division": [d[1].scope.division for d in batch],
            "team": [d[1].scope.team for d in batch],
            "subject": [d[3] for d in batch],
            "decided_at": [d[4] for d in batch],
        }
    )
    out = frame.groupby("org").map_groups(
        replay_org(
            frame["decision_id"], frame["org"], frame["division"], frame["team"], frame["subject"], frame["decided_at"]
        )
    )
    got = {tuple(v.split("|")) for v in out.to_pydict()["decision_id"] if v is not None}
    assert got == expected


def test_daft_reads_the_org_partitioned_tables_and_prunes_to_one_org(built):
    store, root, _ = built
    rows = store.lake.known_rows("fact")
    for org in ORGS[:3]:
        frame = daft.read_deltalake(f"{root}/fact").where(daft.col("org") == org)
        assert frame.count_rows() == sum(1 for o in rows.column("org").to_pylist() if o == org)
    commits = daft.read_deltalake(f"{root}/_commits").where(daft.col("table") == "fact").to_pydict()
    assert set(commits["txn_id"]) >= set(rows.column("txn_id").to_pylist())  # system time, readable by Daft
