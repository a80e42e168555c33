"""Behavioral evals: retrieval quality (`python -m evals.retrieval`)."""
