"""memory_lakehouse: bi-temporal, scoped, governed memory for AI agents on Delta Lake.

The one public import path: scenario scripts, evals and the demo agent import only
from here.

>>> import memory_lakehouse as ml
>>> sorted(ml.__all__)[:3]
['AuditEvent', 'Authorization', 'Basis']
"""

from .audit import AuditEvent
from .capture import (
    CaptureJob, CaptureResult, ExtractionTask, ExtractionWorker, Extractor, LoadReport, Question, RuleExtractor, Seen,
)
from .conversation import Memory, Summary, Turn
from .authz import Authorization, authorize
from .embed import CallableEmbedder, Embedder, HashingEmbedder, MiniLMEmbedder
from .errors import (
    ConflictError, Escalation, LakehouseError, PermissionDenied, StaleGeneration, StoreError, ValidationError,
)
from .forget import ForgetReport, PurgeReport
from .policy import Candidate, Decision
from .records import Envelope, Episode, Fact, Note, Policy, Preference, Reference
from .redact import Redactor
from .replay import ReplayResult
from .retrieve import Hit
from .scope import Principal, Scope
from .store import MemoryStore, open
from .time import Basis
from .write import BatchResult, WriteResult

__version__ = "0.1.0"

__all__ = [
    "AuditEvent", "Authorization", "Basis", "BatchResult", "CallableEmbedder", "Candidate", "CaptureJob",
    "CaptureResult", "ConflictError", "ExtractionTask", "ExtractionWorker", "Extractor", "RuleExtractor", "Seen",
    "Decision", "Embedder", "Envelope", "Episode", "Escalation", "Fact", "ForgetReport", "HashingEmbedder", "Hit",
    "LakehouseError", "LoadReport", "Memory", "MemoryStore", "MiniLMEmbedder", "Note", "PermissionDenied", "Policy",
    "Preference", "Principal", "PurgeReport", "Question", "Redactor", "Reference", "ReplayResult", "Scope",
    "StaleGeneration", "StoreError", "Summary", "Turn", "ValidationError", "WriteResult", "__version__", "authorize", "open",
]
