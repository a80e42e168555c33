"""Conversations become memory: capture → extract → reconcile, and the benchmark loaders.

* `pipeline` — ``store.capture``: turns on the request path, extraction as a task that
  carries the deletion generations, reconcile with sightings for duplicates.
* `extract` — the `Extractor` protocol and the default, model-free `RuleExtractor`.
* `worker` — `ExtractionWorker`: the task off the request path (threads, or spawned
  processes), and how to run it from a real queue.
* `loaders` — LongMemEval and LoCoMo JSON into turns, each session at its own date.
"""

from .extract import Extractor, RuleExtractor, Verdict, classify
from .loaders import FORMATS, LoadReport, Question, load
from .pipeline import CaptureJob, CaptureResult, ExtractionTask, Seen, capture, run_task, seen
from .worker import ExtractionWorker

__all__ = [
    "FORMATS",
    "CaptureJob",
    "CaptureResult",
    "ExtractionTask",
    "ExtractionWorker",
    "Extractor",
    "LoadReport",
    "Question",
    "RuleExtractor",
    "Seen",
    "Verdict",
    "capture",
    "classify",
    "load",
    "run_task",
    "seen",
]
