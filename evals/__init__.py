"""The behavioural eval suite: every promise measured against a naive memory on the same data.

``memlake eval [NAME…]`` or ``python -m evals`` (see `evals.suite`); one module per
property, a naive vector-store baseline (`evals.naive`), deliberately broken stores for
the tests (`evals.broken`) and the scorecard (`evals.scorecard`). docs/evals.md has
today's scorecard and the commands that made it.
"""
