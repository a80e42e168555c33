"""`python -m memory_lakehouse.cli ...` runs `memlake ...`."""

import sys

from .app import main

sys.exit(main())
