"""A saved ``.npy`` array read through a read-only memory map.

Index partitions keep copies of their vectors for exact scans (float32, and int8 codes
with their scales). Mapped from the partition's saved files, only the pages scans touch
are resident, and the kernel may drop them again: a process that rebuilt or loaded many
orgs does not keep every org's copies in memory.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def map_npy(path: Path, shape: tuple[int, ...], dtype: str = "<f4") -> np.ndarray | None:
    """The array of *shape* and *dtype* (little-endian) saved at *path*, as a read-only memory map.

    Pages are read from the file as they are touched, and the kernel may drop them again
    under memory pressure. The files are never rewritten in place (saves go to a new
    directory), and a map outlives the deletion of its file. None when the file is not a
    C-order array of that shape and dtype, is empty, or cannot be mapped: the caller
    then reads it into memory.
    """
    calls = _mmap_calls()
    want = np.dtype(dtype)
    items = int(np.prod(shape))
    if calls is None or items == 0:
        return None
    map_, unmap, from_memory, _ = calls
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                saved_shape, fortran, saved_dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                saved_shape, fortran, saved_dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                return None
            offset = fh.tell()
            stat = os.fstat(fh.fileno())
            size = stat.st_size
            if shape != saved_shape or fortran or saved_dtype != want or size != offset + items * want.itemsize:
                return None
            address = map_(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fh.fileno(), 0)
    except (OSError, ValueError):
        return None
    if address is None or address == ctypes.c_void_p(-1).value:  # MAP_FAILED
        return None
    memory = from_memory(address, size, 0x100)  # PyBUF_READ: the array is read-only
    view = np.frombuffer(memory, dtype=want, count=items, offset=offset).reshape(shape)
    owner = _owner(view)
    _maps[id(owner)] = (address, size)
    _files[id(owner)] = (stat.st_dev, stat.st_ino, offset)
    done = weakref.finalize(owner, _unmap, unmap, id(owner), address, size)
    done.atexit = False  # a thread may still be scanning at exit: the OS unmaps after it
    return view


def release_pages(view: np.ndarray) -> bool:
    """Let go of the pages of the map *view* was made from (`map_npy`): they leave this process's RSS.

    For reads that touch a few scattered rows. The kernel maps more than the pages a
    read touches (a fault-around window, or a whole large folio of the page cache):
    gathering 640 random 1.5 KB rows of a 77 MB cached file put 73 MB of it in this
    process's RSS here, with or without ``MADV_RANDOM``. The file's pages stay in the
    page cache; the next read maps them again. False (and nothing done) when *view* is
    not from a live map of this module: memory of any other kind is never touched.
    """
    calls = _mmap_calls()
    owner = _owner(view)
    # *view* keeps its owner, and so the map, alive through this call: the region is not unmapped under it
    region = _maps.get(id(owner))
    if calls is None or region is None:
        return False
    return bool(calls[3](region[0], region[1], _MADV_DONTNEED) == 0)


def read_rows(view: np.ndarray, path: Path, rows: np.ndarray) -> np.ndarray | None:
    """``view[rows]`` (*rows* ascending) read from the file at *path* with ``pread``, not through
    the map *view* was made from (`map_npy`): none of the map's pages enter this process.

    For a few scattered rows of a map whose pages were let go of (`release_pages`): each
    row read through the map faults its pages in again, and the kernel maps a whole
    folio around it, which must be let go of again. A read costs a system call per run of
    adjacent rows instead. None (nothing read) when *view* is not a whole live map of this
    module, or *path* is no longer the file it was made from (a newer save replaced it).
    """
    owner = _owner(view)
    identity = _files.get(id(owner))
    region = _maps.get(id(owner))
    if identity is None or region is None or view.ndim != 2 or not view.flags.c_contiguous:
        return None
    if len(rows) and (rows[0] < 0 or rows[-1] >= len(view)):
        raise IndexError(f"read_rows: rows out of range for {len(view)} rows")
    dev, ino, offset = identity
    base = view.__array_interface__["data"][0]
    if base != region[0] + offset:  # a view of part of the map: its rows are elsewhere in the file
        return None
    out = np.empty((len(rows), view.shape[1]), dtype=view.dtype)
    row_bytes = view.shape[1] * view.dtype.itemsize
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != (dev, ino):
            return None
        labels = rows.tolist()
        start = 0
        while start < len(labels):  # one read per run of adjacent rows
            stop = start + 1
            while stop < len(labels) and labels[stop] == labels[stop - 1] + 1:
                stop += 1
            want = (stop - start) * row_bytes
            if os.preadv(fd, [out[start:stop].data], offset + labels[start] * row_bytes) != want:
                return None
            start = stop
    except OSError:
        return None
    finally:
        os.close(fd)
    return out


def _owner(view: np.ndarray) -> object:
    """What every view of a map keeps alive: the buffer at the end of its chain of bases."""
    owner: object = view
    while isinstance(owner, np.ndarray):
        owner = owner.base
    return owner


_MADV_DONTNEED = 4
_maps: dict[int, tuple[int, int]] = {}  # id of a live map's owner -> its address and size
_files: dict[int, tuple[int, int, int]] = {}  # the same id -> its file's device and inode, and the array's offset in it


def _unmap(unmap: Callable[..., Any], key: int, address: int, size: int) -> None:
    _maps.pop(key, None)  # before the id can be reused
    _files.pop(key, None)
    unmap(address, size)


@functools.cache
def _mmap_calls() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any], Callable[..., Any]] | None:
    """mmap(2), munmap(2), a read-only memoryview over an address and madvise(2); None where unavailable.

    Not Python's `mmap.mmap`: before Python 3.13 it keeps a duplicate file descriptor open
    for as long as the map lives, one per loaded partition, and a store with a thousand
    orgs would run a process out of descriptors.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # TypeError on Windows: partitions stay in memory
        map_ = libc.mmap
        map_.restype = ctypes.c_void_p
        map_.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_ssize_t]
        unmap = libc.munmap
        unmap.restype = ctypes.c_int
        unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        prototype = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)
        from_memory = prototype(("PyMemoryView_FromMemory", ctypes.pythonapi))
        advise = libc.madvise
        advise.restype = ctypes.c_int
        advise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, TypeError, AttributeError):
        return None
    return map_, unmap, from_memory, advise
