"""Benchmark entry point: `python scripts/bench.py [--records N] [--quick]` (same as `memlake bench`)."""

from memory_lakehouse.bench import main

if __name__ == "__main__":
    main()
