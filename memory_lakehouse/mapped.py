"""A saved ``.npy`` float32 matrix read through a read-only memory map.

Index partitions keep a float32 copy of their vectors for exact scans. Mapped from the
partition's saved ``vectors.npy``, only the pages scans touch are resident, and the
kernel may drop them again: a process that rebuilt or loaded many orgs does not keep
every org's copy in memory.
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


def map_npy(path: Path, count: int, dim: int) -> np.ndarray | None:
    """The ``(count, dim)`` float32 array saved at *path*, as a read-only memory map.

    Pages are read from the file as they are touched, and the kernel may drop them again
    under memory pressure. The files are never rewritten in place (saves go to a new
    directory), and a map outlives the deletion of its file. None when the file is not a
    C-order little-endian float32 array of that shape, is empty, or cannot be mapped: the
    caller then reads it into memory.
    """
    calls = _mmap_calls()
    if calls is None or count * dim == 0:
        return None
    map_, unmap, from_memory = calls
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                return None
            offset = fh.tell()
            size = os.fstat(fh.fileno()).st_size
            if shape != (count, dim) or fortran or dtype != np.dtype("<f4") or size != offset + count * dim * 4:
                return None
            address = map_(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fh.fileno(), 0)
    except (OSError, ValueError):
        return None
    if address is None or address == ctypes.c_void_p(-1).value:  # MAP_FAILED
        return None
    memory = from_memory(address, size, 0x100)  # PyBUF_READ: the array is read-only
    view = np.frombuffer(memory, dtype=np.float32, count=count * dim, offset=offset).reshape(count, dim)
    owner: object = view
    while isinstance(owner, np.ndarray):  # what every view of the map keeps alive
        owner = owner.base
    done = weakref.finalize(owner, unmap, address, size)
    done.atexit = False  # a thread may still be scanning at exit: the OS unmaps after it
    return view


@functools.cache
def _mmap_calls() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]] | None:
    """mmap(2), munmap(2) and a read-only memoryview over an address; None where unavailable.

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
    except (OSError, TypeError, AttributeError):
        return None
    return map_, unmap, from_memory
