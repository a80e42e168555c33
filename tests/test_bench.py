"""The benchmark: the recall run reports what serving its store costs in a fresh process."""

from __future__ import annotations

import os
import resource

import pytest

from memory_lakehouse import bench


@pytest.mark.slow
@pytest.mark.integration
def test_the_recall_bench_reports_the_peak_rss_of_serving_from_a_fresh_process(tmp_path):
    out = bench.run(400, quick=True, root=str(tmp_path / "store"), recall=True, embedder="hashing")
    assert 0 < out["peak_rss_serving_mb"] <= out["peak_rss_serving_all_orgs_mb"]
    assert out["serving"]["peak_rss_mb"] == out["peak_rss_serving_mb"]
    for kind in ("recall_now", "recall_as_of_midpoint", "recall_selective_1pct"):
        assert out["serving"][kind]["p50_ms"] > 0
    peaks = out["recall"]["peak_rss_mb_after"]
    assert peaks["ingest"] <= peaks["index_build"] <= peaks["recall"] <= out["peak_rss_mb"]


@pytest.mark.integration
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="VmHWM is Linux's")
def test_a_fresh_process_reports_its_own_peak_not_its_parents():
    ballast = bytearray(300 * 2**20)
    ballast[:: 4096] = b"x" * len(range(0, len(ballast), 4096))  # resident, not just reserved
    parent = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = bench.in_fresh_process(bench.own_peak_rss_mb)
    del ballast
    # ru_maxrss in the child would be at least the parent's peak: Linux carries it across exec
    assert child < parent - 200
