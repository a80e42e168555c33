"""`commit_gate.CommitGate`: appends go on beside a rewrite up to its allowance, an exclusive
rewrite holds them, and one rewrite of a table runs at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from memory_lakehouse.commit_gate import CommitGate

#: How long a thread that should be held is given to get through anyway (a broken gate lets
#: it through at once; a working one never does, however long this is).
HELD = 0.3

Enter = Callable[[], AbstractContextManager[None]]


def _in_thread(enter: Enter, leave: threading.Event) -> threading.Event:
    """Run ``with enter(): leave.wait()`` in a thread; the event it returns is set once inside."""
    inside = threading.Event()

    def run() -> None:
        with enter():
            inside.set()
            leave.wait(30)

    threading.Thread(target=run, daemon=True).start()
    return inside


def _held_until(enter: Enter, blocker: threading.Event, what: str) -> None:
    """*enter* in another thread waits while *blocker* is unset, and gets in once it is set."""
    leave = threading.Event()
    inside = _in_thread(enter, leave)
    assert not inside.wait(HELD), f"{what} went through"
    blocker.set()
    assert inside.wait(10), f"{what} never went through after"
    leave.set()


def test_appends_go_on_beside_a_rewrite_until_its_allowance_then_wait_for_it():
    gate = CommitGate(allowance=2)
    rewrite_done = threading.Event()
    assert _in_thread(gate.rewriting, rewrite_done).wait(10)
    for _ in range(2):
        with gate.appending():
            pass
    assert gate.landed == 2
    _held_until(gate.appending, rewrite_done, "a third append beside the rewrite")


def test_an_exclusive_rewrite_waits_for_the_append_in_flight_and_holds_later_ones():
    gate = CommitGate()
    append_done = threading.Event()
    assert _in_thread(gate.appending, append_done).wait(10)
    rewrite_done = threading.Event()
    _held_until(lambda: gate.rewriting(exclusive=True), append_done, "an exclusive rewrite beside an append")
    # _held_until's rewrite has left; another one, held open, keeps later appends out
    assert _in_thread(lambda: gate.rewriting(exclusive=True), rewrite_done).wait(10)
    _held_until(gate.appending, rewrite_done, "an append beside an exclusive rewrite")


def test_one_rewrite_of_a_table_at_a_time():
    gate = CommitGate()
    first_done = threading.Event()
    assert _in_thread(gate.rewriting, first_done).wait(10)
    _held_until(gate.rewriting, first_done, "a second rewrite of the table")
