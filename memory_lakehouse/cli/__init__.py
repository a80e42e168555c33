"""`memlake`: the command line, a thin layer over the library (one module per command group).

`app` holds the parser, the shared options and `main`; each other module registers one
group of commands (``register(sub)``) and makes one library call per command.
"""

from .app import build_parser, main

__all__ = ["build_parser", "main"]
