"""`commit_gate.CommitGate`: appends go on beside a rewrite up to its allowance, an exclusive
rewrite holds them, and one rewrite of a table runs at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable

from memory_lakehouse.commit_gate import CommitGate

#: How long a thread that should be held is given to get through anyway (a broken gate lets
#: it through at once; a working one never does, however long this is).
HELD = 0.3


def _in_thread(enter: Callable[[], object], release: threading.Event) -> tuple[threading.Thread, threading.Event]:
    """Run ``with enter(): release.wait()`` in a thread; the event it returns is set once inside."""
    inside = threading.Event()

    def run() -> None:
        with enter():  # type: ignore[attr-defined]
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, inside


def test_appends_go_on_beside_a_rewrite_until_its_allowance_then_wait_for_it():
    gate = CommitGate(allowance=2)
    done = threading.Event()
    rewrite, rewriting = _in_thread(gate.rewriting, done)
    assert rewriting.wait(10)
    for _ in range(2):
        with gate.appending():
            pass
    assert gate.landed == 2
    leave = threading.Event()
    third, inside = _in_thread(gate.appending, leave)
    assert not inside.wait(HELD), "the third append went through beside the rewrite"
    done.set()
    rewrite.join(10)
    assert inside.wait(10), "the held append never went through after the rewrite"
    leave.set()


def test_an_exclusive_rewrite_waits_for_the_append_in_flight_and_holds_later_ones():
    gate = CommitGate()
    finish_append = threading.Event()
    append, appending = _in_thread(gate.appending, finish_append)
    assert appending.wait(10)
    finish_rewrite = threading.Event()
    rewrite, rewriting = _in_thread(lambda: gate.rewriting(exclusive=True), finish_rewrite)
    assert not rewriting.wait(HELD), "the exclusive rewrite began while an append was committing"
    finish_append.set()
    assert rewriting.wait(10)
    leave = threading.Event()
    later, inside = _in_thread(gate.appending, leave)
    assert not inside.wait(HELD), "an append went through beside an exclusive rewrite"
    finish_rewrite.set()
    assert inside.wait(10)
    leave.set()


def test_one_rewrite_of_a_table_at_a_time():
    gate = CommitGate()
    finish_first = threading.Event()
    first, first_in = _in_thread(gate.rewriting, finish_first)
    assert first_in.wait(10)
    leave = threading.Event()
    second, second_in = _in_thread(gate.rewriting, leave)
    assert not second_in.wait(HELD), "two rewrites of one table ran at once"
    finish_first.set()
    assert second_in.wait(10)
    leave.set()
