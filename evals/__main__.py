"""``python -m evals``: the behavioural eval suite (see `evals.suite`)."""

import sys

from .suite import main

sys.exit(main())
