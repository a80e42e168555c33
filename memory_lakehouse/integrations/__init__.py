"""Adapters for the frameworks agents already use (each needs its optional extra).

* `memory_lakehouse.integrations.langgraph` — a LangGraph `BaseStore` (extra ``langgraph``).
* `memory_lakehouse.integrations.mcp` — an MCP server over stdio, ``memlake mcp`` (extra ``mcp``).
"""
