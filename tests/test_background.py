"""`background.Worker`: work asked for from many threads is done once each, none lost at the thread's end."""

from __future__ import annotations

import threading

from memory_lakehouse.background import Worker


def test_work_asked_for_from_many_threads_while_the_worker_ends_and_starts_is_all_done_once():
    pending: list[int] = []
    done: list[int] = []
    threads_used: set[str] = set()

    def do(piece: int) -> None:
        threads_used.add(threading.current_thread().name)
        done.append(piece)

    worker = Worker("test-worker", lambda: pending.pop(0) if pending else None, do)

    def ask(base: int) -> None:
        for i in range(300):
            with worker.lock:
                pending.append(base + i)
                worker.kick()

    askers = [threading.Thread(target=ask, args=(1000 * t,)) for t in range(8)]
    for t in askers:
        t.start()
    for t in askers:
        t.join()
    assert worker.wait(timeout=60)
    assert sorted(done) == sorted(1000 * t + i for t in range(8) for i in range(300))
    assert threads_used == {"test-worker"} and not worker.running


def test_a_piece_that_raises_ends_the_thread_and_the_next_request_starts_another():
    pending = ["boom", "ok"]
    done: list[str] = []

    def do(piece: str) -> None:
        if piece == "boom":
            raise RuntimeError(piece)
        done.append(piece)

    worker = Worker("test-worker", lambda: pending.pop(0) if pending else None, do)
    previous = threading.excepthook
    threading.excepthook = lambda args: None  # the thread's exception is the point here
    try:
        with worker.lock:
            worker.kick()
        assert worker.wait(timeout=60) and done == []
        with worker.lock:
            worker.kick()
        assert worker.wait(timeout=60) and done == ["ok"]
    finally:
        threading.excepthook = previous
