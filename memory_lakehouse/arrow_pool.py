"""Which allocator Arrow's buffers come from in a process that serves memory.

pyarrow takes every buffer the store reads or builds (snapshots, takes, Parquet reads and
writes) from its default memory pool: mimalloc since pyarrow 20 (this project needs >=
20). What an allocator keeps of freed pages for reuse counts in the process's RSS, and
mimalloc kept more of it here. On the multi-tenant bench (`memlake bench --workload
tenants`, same code, two pairs) jemalloc, also built into pyarrow's wheels, held the same
work in less: Δ peak RSS 403-415 MB against 421-436 at 100k records, a restarted process's
211-223 against 252-278, and 2,202 against 2,332 MB at 1M (one run each); see
docs/performance.md, "Twenty-fourth round". Arrow's maintainers point users who see this
to ``ARROW_DEFAULT_MEMORY_POOL=jemalloc`` (apache/arrow#46929).

The pool is the process's, shared with every other Arrow user in it: the library never
switches it on its own (`open` does not call this). An application calls `prefer_jemalloc`
once, early; the ``memlake`` command does, for itself and the processes it spawns. An
explicit ``ARROW_DEFAULT_MEMORY_POOL`` is the operator's choice and always wins.
"""

from __future__ import annotations

import os

import pyarrow as pa

#: The environment variable pyarrow reads for its default pool (``jemalloc``, ``mimalloc``, ``system``).
POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def prefer_jemalloc() -> str:
    """Make jemalloc Arrow's default pool unless the process chose one; return the pool in use.

    The choice is left alone when ``ARROW_DEFAULT_MEMORY_POOL`` is set (whatever it names)
    or when this pyarrow build has no jemalloc (then the default stays). Otherwise the
    variable is set too, so that processes this one spawns (the bench's fresh processes,
    an `ExtractionWorker`'s) make the same choice when pyarrow starts in them. Buffers allocated before
    the switch stay in the pool they came from and are freed there: the switch is safe at
    any time, and cheapest before the first big read.
    """
    if os.environ.get(POOL_VARIABLE):
        return pool_in_use()
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a build without jemalloc (pyarrow's Windows wheels)
        return pool_in_use()
    pa.set_memory_pool(pool)
    os.environ[POOL_VARIABLE] = "jemalloc"
    return pool_in_use()


def pool_in_use() -> str:
    """The backend of Arrow's default pool in this process (``mimalloc``, ``jemalloc`` or ``system``)."""
    return str(pa.default_memory_pool().backend_name)
