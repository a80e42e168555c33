"""Long work shows itself: a bar on a terminal's stderr, log lines when stderr is not a
terminal, nothing with ``--quiet``; stdout is the command's output either way.

Thresholds are lowered (``MEMLAKE_PROGRESS_MIN``, `Progress.settings`) so small inputs
show what a big one would.
"""

import io
import json
import logging
import os
import pty
import re
import select
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import memory_lakehouse as ml
from memory_lakehouse.cli import main as cli_main
from memory_lakehouse.forget import PURGE_PHASES
from memory_lakehouse.write import PHASES

T0 = datetime(2026, 9, 1, tzinfo=UTC)
LOCOMO = Path(__file__).resolve().parent.parent / "data" / "conversations" / "locomo_sample.json"
STEWARD = ["--as", "dpo", "--scope", "acme", "--role", "steward"]
BAR = "━"  # what rich draws a bar with
ESC = "\x1b"


def _facts_file(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(
                json.dumps(
                    {
                        "kind": "fact",
                        "subject": f"user:{i}",
                        "attribute": "plan",
                        "value": f"plan {i % 3}",
                        "valid_from": "2026-09-01T00:00:00Z",
                        "source": "crm",
                    }
                )
                + "\n"
            )
    return path


def _memlake(argv: list[str], *, terminal: bool) -> tuple[int, str, str]:
    """Run ``memlake argv`` in a child with stdout on a pipe and stderr on a pseudo-terminal
    (*terminal*) or a pipe; returns (exit status, stdout, stderr)."""
    env = dict(os.environ, MEMLAKE_PROGRESS_MIN="1", TERM="xterm", COLUMNS="120")
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "memory_lakehouse.cli", *argv]
    if not terminal:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    child = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    err = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed its end
                    break
                if not chunk:
                    break
                err += chunk
            elif child.poll() is not None:
                break
        assert child.stdout is not None
        out = child.stdout.read().decode()
        child.wait(timeout=300)
    finally:
        os.close(master)
    return child.returncode, out, err.decode(errors="replace")


def _same_output(text: str) -> str:
    return re.sub(r"txn_[0-9a-f]+", "txn_…", text)


@pytest.fixture
def store_path(tmp_path):
    """A function making a fresh store (one per mode: a second write would find duplicates)."""
    count = iter(range(100))

    def make() -> str:
        path = str(tmp_path / f"store{next(count)}")
        assert cli_main(["init", "--store", path]) == 0
        return path

    return make


def test_write_from_a_file_draws_a_bar_on_a_terminal_logs_elsewhere_and_quiet_shows_nothing(
    tmp_path, store_path, capsys
):
    src = _facts_file(tmp_path / "facts.jsonl", 30)
    write = ["write", "--file", str(src), *STEWARD]
    code, on_terminal, drawn = _memlake([*write, "--store", store_path()], terminal=True)
    assert code == 0
    assert BAR in drawn and "reading" in drawn and "writing 30 records" in drawn, drawn
    assert ESC not in on_terminal and BAR not in on_terminal  # the bar never touches stdout

    code, quiet, nothing = _memlake([*write, "--store", store_path(), "--quiet"], terminal=True)
    assert code == 0 and nothing.strip() == "", nothing

    code, piped, logged = _memlake([*write, "--store", store_path()], terminal=False)
    assert code == 0 and BAR not in logged and ESC not in logged
    lines = logged.splitlines()
    assert lines and all(line.startswith("memlake: ") for line in lines), logged
    assert any("writing 30 records: committing" in line for line in lines), logged

    path = store_path()
    capsys.readouterr()
    assert cli_main([*write, "--store", path]) == 0  # in process, nothing asked: the plain output
    plain = capsys.readouterr().out
    assert plain.startswith("30 record(s): 30 inserted")
    assert {_same_output(plain)} == {_same_output(on_terminal), _same_output(quiet), _same_output(piped)}


def test_json_output_stays_parseable_while_a_bar_is_drawn(tmp_path, store_path):
    src = _facts_file(tmp_path / "facts.jsonl", 12)
    code, out, err = _memlake(["write", "--file", str(src), "--json", "--store", store_path(), *STEWARD], terminal=True)
    assert code == 0 and BAR in err
    assert json.loads(out)["counts"]["inserted"] == 12


def test_quiet_silences_the_log_lines_too_when_stderr_is_not_a_terminal(tmp_path, store_path, capsys):
    src, path = _facts_file(tmp_path / "facts.jsonl", 5), store_path()
    capsys.readouterr()
    with ml.Progress.settings(min_items=1):
        assert cli_main(["write", "--file", str(src), "--store", path, *STEWARD, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("5 record(s)")


def test_below_its_threshold_work_shows_nothing(tmp_path, store_path, capsys):
    src, path = _facts_file(tmp_path / "facts.jsonl", 5), store_path()
    assert cli_main(["write", "--file", str(src), "--store", path, *STEWARD]) == 0
    assert capsys.readouterr().err == ""


def test_a_bar_is_drawn_only_on_a_terminal_and_nested_work_shares_its_display(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    with ml.Progress("outer", total=3, unit="steps", enabled=True) as outer:
        outer.phase("first")
        with ml.Progress("inner", total=300, unit="rows") as inner:
            inner.advance(300)
            drawn_while_inside = [inner.drawn, outer.drawn]
        outer.advance(3)
    assert drawn_while_inside == [True, True] and not outer.drawn
    drawn = screen.getvalue()
    assert "outer: first" in drawn and "inner" in drawn and "0/300" in drawn
    with ml.Progress.settings(bars=False), ml.Progress("hidden", total=1000) as hidden:
        assert hidden.shown and not hidden.drawn


def test_without_a_terminal_work_is_logged_with_its_phases_and_its_time(caplog):
    caplog.set_level(logging.INFO, logger="memory_lakehouse")
    with ml.Progress("job", total=2, unit="steps", enabled=True) as job:
        job.phase("one")
        job.advance()
        job.phase("a case counter", logged=False)
        job.advance()
    assert not job.drawn
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "job: 2 steps" and "job: one (0 of 2 steps done)" in messages
    assert not any("case counter" in m for m in messages)
    assert re.fullmatch(r"job: 2 of 2 steps in \d+\.\d s", messages[-1])


def test_the_threshold_is_settable_and_false_keeps_work_silent(caplog):
    caplog.set_level(logging.INFO, logger="memory_lakehouse")
    with ml.Progress("small", total=10) as small:
        pass
    with ml.Progress.settings(min_items=10), ml.Progress("small", total=10) as shown:
        pass
    with ml.Progress.settings(min_items=0), ml.Progress("off", total=10, enabled=False) as off:
        pass
    assert (small.shown, shown.shown, off.shown) == (False, True, False)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["small", "small"]


def test_write_many_names_its_phases_and_index_catch_up_says_so(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="memory_lakehouse")
    store = ml.open(str(tmp_path / "s"), embedder=ml.HashingEmbedder(dim=32))
    steward = ml.Principal("dpo", ml.Scope("acme"), role="steward")
    facts = [ml.Fact(f"user:{i}", "plan", f"plan {i}", T0 + timedelta(minutes=i), source="crm") for i in range(20)]
    with ml.Progress.settings(min_items=1):
        store.write_many(facts[:10], by=steward)
        store.recall("plan", by=steward)
        store.write_many(facts[10:], by=steward)
        store.recall("plan", by=steward)
    store.close()
    messages = [r.getMessage() for r in caplog.records]
    for phase in PHASES:
        assert f"writing 10 records: {phase} (" in " ".join(messages), phase
    assert any(m.startswith("indexing acme") for m in messages)
    assert any(m.startswith("catching up index acme") and m.endswith(": 10 rows") for m in messages), messages


def test_purge_and_load_report_their_progress_through_the_cli_log(tmp_path, capsys):
    path = str(tmp_path / "s")
    with ml.Progress.settings(min_items=1):
        assert cli_main(["load", str(LOCOMO), "--format", "locomo", "--store", path, *STEWARD]) == 0
        loaded = capsys.readouterr()
        subject = json.loads(LOCOMO.read_text())["speaker_a"]
        assert cli_main(["forget", subject, "--reason", "asked", "--store", path, *STEWARD]) == 0
        capsys.readouterr()
        assert cli_main(["purge", "--yes", "--store", path, *STEWARD, "--json"]) == 0
        purged = capsys.readouterr()
    assert "memlake: loading locomo:" in loaded.err and "sessions in" in loaded.err
    assert json.loads(purged.out)["verified"] is True  # stdout: the report alone
    for phase in ("rewriting the turn table", *PURGE_PHASES):
        assert f"memlake: purge: {phase}" in purged.err, phase
