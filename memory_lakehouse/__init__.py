"""memory_lakehouse: bi-temporal, scoped, governed memory for AI agents on Delta Lake.

The one public import path: scenario scripts, evals and the demo agent import only
from here.

>>> import memory_lakehouse as ml
>>> sorted(ml.__all__)[:3]
['AuditEvent', 'AuditLog', 'Authorization']
"""

from .arrow_pool import prefer_jemalloc
from .audit import AuditEvent, AuditLog
from .authz import Authorization, authorize
from .browse import History, Listing, SlotVersion
from .capture import (
    CaptureJob,
    CaptureResult,
    ExtractionTask,
    ExtractionWorker,
    Extractor,
    LoadReport,
    Question,
    RuleExtractor,
    Seen,
)
from .context import Context, ContextItem
from .conversation import Memory, Summary, Turn
from .embed import CallableEmbedder, Embedder, HashingEmbedder, MiniLMEmbedder
from .errors import (
    ConflictError,
    Escalation,
    LakehouseError,
    PermissionDenied,
    StaleGeneration,
    StoreError,
    ValidationError,
)
from .forget import ForgetReport, PurgeReport
from .maintenance import CheckpointReport, CompactReport, MaintenancePolicy, MaintenanceStatus, VacuumReport
from .outside import ExportReport
from .policy import Candidate, Decision
from .progress import Progress
from .ranking import Ranking
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
    "AuditEvent",
    "AuditLog",
    "Authorization",
    "Basis",
    "BatchResult",
    "CallableEmbedder",
    "Candidate",
    "CaptureJob",
    "CaptureResult",
    "CheckpointReport",
    "CompactReport",
    "ConflictError",
    "Context",
    "ContextItem",
    "Decision",
    "Embedder",
    "Envelope",
    "Episode",
    "Escalation",
    "ExportReport",
    "ExtractionTask",
    "ExtractionWorker",
    "Extractor",
    "Fact",
    "ForgetReport",
    "HashingEmbedder",
    "History",
    "Hit",
    "LakehouseError",
    "Listing",
    "LoadReport",
    "MaintenancePolicy",
    "MaintenanceStatus",
    "Memory",
    "MemoryStore",
    "MiniLMEmbedder",
    "Note",
    "PermissionDenied",
    "Policy",
    "Preference",
    "Principal",
    "Progress",
    "PurgeReport",
    "Question",
    "Ranking",
    "Redactor",
    "Reference",
    "ReplayResult",
    "RuleExtractor",
    "Scope",
    "Seen",
    "SlotVersion",
    "StaleGeneration",
    "StoreError",
    "Summary",
    "Turn",
    "VacuumReport",
    "ValidationError",
    "WriteResult",
    "__version__",
    "authorize",
    "open",
    "prefer_jemalloc",
]
