"""Every seed story's self-checking script passes on a fresh store (`make demo` runs them too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parent.parent / "scripts").glob("scenario_*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_the_scenario_script_passes_every_check(script, tmp_path):
    run = subprocess.run(
        [sys.executable, str(script), "--store", str(tmp_path / "store")], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "FAIL" not in run.stdout


def test_there_is_a_scenario_script_for_the_seed_stories():
    assert len(SCRIPTS) >= 3
