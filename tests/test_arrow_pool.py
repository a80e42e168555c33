"""Arrow's memory pool: the `memlake` command picks jemalloc for its process; the library
never switches it by itself; an operator's ``ARROW_DEFAULT_MEMORY_POOL`` always wins.

The pool is process-wide, so each case runs in an interpreter of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from memory_lakehouse.arrow_pool import POOL_VARIABLE

try:
    pa.jemalloc_memory_pool()
    HAS_JEMALLOC = True
except NotImplementedError:
    HAS_JEMALLOC = False

needs_jemalloc = pytest.mark.skipif(not HAS_JEMALLOC, reason="this pyarrow build has no jemalloc")


def _in_fresh_interpreter(code: str, *, pool: str | None) -> dict[str, str]:
    """Run *code* in a new interpreter (with *pool* as the operator's choice, or none) and
    return the JSON it prints last: what it saw of the pool."""
    env = {k: v for k, v in os.environ.items() if k != POOL_VARIABLE}
    if pool is not None:
        env[POOL_VARIABLE] = pool
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


_REPORT = (
    "import json, os, pyarrow as pa\n"
    'print(json.dumps({"pool": pa.default_memory_pool().backend_name, '
    f'"variable": os.environ.get("{POOL_VARIABLE}", "")}}))\n'
)


@needs_jemalloc
def test_the_memlake_command_runs_arrow_on_jemalloc_and_its_spawned_processes_inherit_the_choice(tmp_path):
    seen = _in_fresh_interpreter(
        f"from memory_lakehouse.cli.app import main\nmain(['init', '--store', {str(tmp_path / 's')!r}, '--quiet'])\n"
        + _REPORT,
        pool=None,
    )
    assert seen == {"pool": "jemalloc", "variable": "jemalloc"}


def test_opening_a_store_leaves_the_applications_pool_alone(tmp_path):
    seen = _in_fresh_interpreter(
        "import pyarrow as pa\nbefore = pa.default_memory_pool().backend_name\n"
        f"import memory_lakehouse as ml\nml.open({str(tmp_path / 's')!r}).close()\n"
        "assert pa.default_memory_pool().backend_name == before, before\n" + _REPORT,
        pool=None,
    )
    assert seen["variable"] == ""


@pytest.mark.parametrize("chosen", ["system", "mimalloc"])
def test_an_operators_pool_wins_over_the_commands_preference(tmp_path, chosen):
    seen = _in_fresh_interpreter(
        f"import memory_lakehouse as ml\nassert ml.prefer_jemalloc() == {chosen!r}\n"
        f"from memory_lakehouse.cli.app import main\nmain(['init', '--store', {str(tmp_path / 's')!r}, '--quiet'])\n"
        + _REPORT,
        pool=chosen,
    )
    assert seen == {"pool": chosen, "variable": chosen}


@needs_jemalloc
def test_prefer_jemalloc_switches_an_unchosen_pool_once_and_reports_it():
    seen = _in_fresh_interpreter(
        "import memory_lakehouse as ml\nassert ml.prefer_jemalloc() == 'jemalloc'\n"
        "assert ml.prefer_jemalloc() == 'jemalloc'\n" + _REPORT,
        pool=None,
    )
    assert seen == {"pool": "jemalloc", "variable": "jemalloc"}
