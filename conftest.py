"""Doctest collection skips the integrations whose optional extra is not installed."""

import importlib.util

collect_ignore = [
    f"memory_lakehouse/integrations/{name}.py"
    for name in ("langgraph", "mcp")
    if importlib.util.find_spec(name) is None
]
