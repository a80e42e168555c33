"""Which local tables' logs changed since a read last asked: inotify on each ``_delta_log``.

Why: a public read asks each table it reads whether another writer committed since
(`lake.Lake.refresh`: read-your-writes across processes). On a local store that is two
stat() calls a table (the next commit file, ``_last_checkpoint``) and the Python around
them: ~0.25-0.3 ms of a ~3 ms recall over ten tables at 100k, measured in one process by
alternating blocks of new actors' recalls with the probes and without. The kernel can say
instead which log directories saw an entry created, renamed, written or deleted: one
non-blocking read of an inotify descriptor per refresh, and a probe only of the tables
named.

The rule does not change: a table is asked exactly as before (`Lake._refresh_table`)
whenever anything in its log changed since it was last asked, and a table no watch
covers is asked every time. The kernel queues an event before the call that made the
change returns, so a commit another process finished before a read began is among the
events the read takes in. When the queue overflowed, every watched table counts as
changed. tests/test_freshness.py checks reads with the watch against reads without it.

Only where inotify sees every writer: Linux, on a file system of this machine's kernel
(ext4, xfs, btrfs, tmpfs, overlay...). On NFS or another network or FUSE file system a
writer on another host makes no event here, so there every read probes, as everywhere
when ``MEMLAKE_WATCH_LOGS=0``.

One inotify descriptor serves every store of the process (a user may hold only 128): each
store registers its tables' log directories, and a drain hands each event to every store
watching that directory. A forked child would share the parent's queue and take its
events: there the parent's watches answer "changed" for every table, and the child's own
stores open a descriptor of their own.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import struct
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

log = logging.getLogger(__name__)

#: Set to ``0`` to ask every table on every read, as without a watch.
WATCH_ENV = "MEMLAKE_WATCH_LOGS"

#: File systems whose changes every writer makes through this machine's kernel.
LOCAL_FILE_SYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs", "bcachefs", "jfs"}
)

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_UNMOUNT, _IN_Q_OVERFLOW, _IN_IGNORED = 0x2000, 0x4000, 0x8000
_WATCHED_EVENTS = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
)
#: The directory itself went away: its events stop, so its tables are asked every time.
_GONE = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_UNMOUNT | _IN_IGNORED
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name


class TableWatch:
    """One store's view of the watch: which of its tables' logs changed since it last asked.

    `unchanged_of` drains the kernel's queue into every store's set; `asking` wraps the
    asking of a table's log.
    """

    def __init__(self, hub: _Inotify, watched: Mapping[str, int]) -> None:
        self._hub = hub
        self._wds = dict(watched)  # table -> watch descriptor
        self._changed: set[str] = set(watched)  # nothing is known yet: the first refresh asks every table
        self._lock = threading.Lock()
        self._closed = False

    def unchanged_of(self, tables: Iterable[str]) -> set[str]:
        """Those of *tables* whose logs are watched and saw no change since they were last
        asked, after the kernel's queue is taken in (one read of the descriptor)."""
        if self._closed or self._hub.pid != os.getpid():  # a forked child shares the parent's queue: it cannot tell
            return set()
        self._hub.drain()
        with self._lock:
            return {t for t in tables if t in self._wds and t not in self._changed}

    def _taken(self, table: str) -> None:
        with self._lock:
            self._changed.discard(table)

    def _not_taken(self, table: str) -> None:
        with self._lock:
            self._changed.add(table)

    def _saw(self, wd: int, gone: bool) -> None:
        with self._lock:
            for table, watched in list(self._wds.items()):
                if watched == wd:
                    self._changed.add(table)
                    if gone:
                        del self._wds[table]

    def _saw_everything(self) -> None:
        with self._lock:
            self._changed.update(self._wds)

    def close(self) -> None:
        """Stop watching (the store is closed or gone): its tables are asked every time.

        Takes no lock of its own: as the finalizer of a collected store, it can run in the
        middle of a drain, in the thread that holds the locks (`_Inotify.unregister`)."""
        self._closed = True
        self._hub.unregister(self)


class _Inotify:
    """The process's one inotify descriptor and the stores watching through it."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self.pid = os.getpid()  # whose queue it is: a forked child reading it would take the parent's events
        self._fd = fd
        self._libc = libc
        self._lock = threading.Lock()
        self._watchers: list[TableWatch] = []
        self._users: dict[int, int] = {}  # wd -> how many stores' tables watch it
        self._leaving: list[TableWatch] = []  # closed, let go of at the next chance (`unregister`)

    def watch(self, directories: Mapping[str, str]) -> TableWatch:
        """A store's watch over its tables' log *directories* (table -> path). A directory
        that cannot be watched (missing, no permission, out of watches) is left out: its
        table is asked every time."""
        watched: dict[str, int] = {}
        with self._lock:
            self._let_go()
            for table, path in directories.items():
                wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), _WATCHED_EVENTS)
                if wd < 0:
                    log.debug("no watch on %s (errno %d): it is asked on every read", path, ctypes.get_errno())
                    continue
                watched[table] = wd
                self._users[wd] = self._users.get(wd, 0) + 1
            watch = TableWatch(self, watched)
            self._watchers.append(watch)
        return watch

    def unregister(self, watch: TableWatch) -> None:
        """Let go of a closed store's watches: now if the lock is free, else at the next
        drain. Never waits for the lock: a store's finalizer can run in the thread that
        holds it (a garbage collection in the middle of a drain), where waiting would hang."""
        self._leaving.append(watch)
        if self._lock.acquire(blocking=False):
            try:
                self._let_go()
            finally:
                self._lock.release()

    def _let_go(self) -> None:
        """Remove the closed stores' watches (call with the lock held); a directory no store
        watches any more loses its kernel watch."""
        while self._leaving:
            watch = self._leaving.pop()
            if watch not in self._watchers:
                continue
            self._watchers.remove(watch)
            for wd in set(watch._wds.values()):
                left = self._users.get(wd, 0) - 1
                if left > 0:
                    self._users[wd] = left
                elif wd in self._users:
                    del self._users[wd]
                    self._libc.inotify_rm_watch(self._fd, wd)

    def drain(self) -> None:
        """Read every queued event and hand each to the stores watching its directory."""
        with self._lock:
            self._let_go()
            while True:
                try:
                    data = os.read(self._fd, 65536)
                except BlockingIOError:
                    return
                except OSError as exc:  # EINTR: read again; anything else: every table counts as changed
                    if exc.errno == errno.EINTR:
                        continue
                    self._overflowed()
                    return
                self._dispatch(data)

    def _dispatch(self, data: bytes) -> None:
        at = 0
        while at + _EVENT.size <= len(data):
            wd, mask, _, size = _EVENT.unpack_from(data, at)
            at += _EVENT.size + size
            if mask & _IN_Q_OVERFLOW:
                self._overflowed()
                continue
            gone = bool(mask & _GONE)
            if gone:
                self._users.pop(wd, None)
            for watch in list(self._watchers):  # a finalizer run meanwhile only queues its store's leaving
                watch._saw(wd, gone)

    def _overflowed(self) -> None:
        for watch in list(self._watchers):
            watch._saw_everything()


@contextmanager
def asking(watch: TableWatch | None, table: str) -> Iterator[None]:
    """Around the asking of *table*'s log, the one protocol `Lake.refresh` and
    `Ledger.refresh` share: the table leaves *watch*'s changed set first, so a change made
    while it is asked stays for the next read, and goes back if the asking fails. Nothing
    without a watch."""
    if watch is None:
        yield
        return
    watch._taken(table)
    try:
        yield
    except BaseException:
        watch._not_taken(table)
        raise


_hub: _Inotify | None = None
_hub_failed = False
_hub_lock = threading.Lock()


def _the_hub() -> _Inotify | None:
    """The process's inotify descriptor, opened on first use; None where there is none."""
    global _hub, _hub_failed
    with _hub_lock:
        if _hub is None and not _hub_failed:
            try:
                libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols: libc's among them
                fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            except (OSError, AttributeError):
                fd = -1
            if fd < 0:
                _hub_failed = True
                log.debug("no inotify here: reads ask every table's log")
            else:
                _hub = _Inotify(fd, libc)
        return _hub


def _forget_hub_in_child() -> None:
    """After a fork: the child's stores watch through a descriptor of their own (the
    parent's watches answer nothing there: `TableWatch.unchanged_of`)."""
    global _hub, _hub_failed
    _hub, _hub_failed = None, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_hub_in_child)


def watch_logs(directories: Mapping[str, str]) -> TableWatch | None:
    """A watch over the tables' log *directories* (table -> path), or None where a watch
    cannot see every writer (not Linux, not a local file system, ``MEMLAKE_WATCH_LOGS=0``)
    or inotify is not there: then every read asks every table, as before."""
    if not directories or os.environ.get(WATCH_ENV, "1") == "0" or not sys.platform.startswith("linux"):
        return None
    if any(file_system_of(path) not in LOCAL_FILE_SYSTEMS for path in directories.values()):
        return None
    hub = _the_hub()
    return hub.watch(directories) if hub is not None else None


def file_system_of(path: str) -> str | None:
    """The type of the file system *path* lies on (``/proc/self/mountinfo``: its longest
    mount point prefix), or None when it cannot be told."""
    try:
        real = os.path.realpath(path)
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            best, kind = "", None
            for line in mounts:
                fields = line.split()
                if " - " not in line or len(fields) < 5:
                    continue
                point = fields[4].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, line.split(" - ", 1)[1].split()[0]
            return kind
    except OSError:
        return None
