"""agent_loop: the demo agent — a thin adapter that drives a local model through the memory layer.

It imports only the public API (``import memory_lakehouse as ml``); nothing in the
library imports it. ``run_turn`` is one agent turn; ``SmolLM2`` the local model
adapter; ``python -m agent_loop.demo`` the story.
"""

from .extractor import ModelExtractor
from .model import ChatModel, ModelUnavailable, SmolLM2, smollm2_path
from .turn import Proposal, TurnResult, run_turn

__all__ = [
    "ChatModel",
    "ModelExtractor",
    "ModelUnavailable",
    "Proposal",
    "SmolLM2",
    "TurnResult",
    "run_turn",
    "smollm2_path",
]
