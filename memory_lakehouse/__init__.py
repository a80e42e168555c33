"""memory_lakehouse: bi-temporal, scoped, governed memory for AI agents on Delta Lake.

>>> import memory_lakehouse as ml
>>> sorted(ml.__all__)[:3]
['AuditEvent', 'Authorization', 'Basis']
"""

from .audit import AuditEvent
from .authz import Authorization, authorize
from .errors import (
    ConflictError, Escalation, LakehouseError, PermissionDenied, StaleGeneration, StoreError, ValidationError,
)
from .policy import Candidate, Decision
from .records import Envelope, Episode, Fact, Note, Policy, Preference, Reference
from .redact import Redactor
from .retrieve import Hit
from .scope import Principal, Scope
from .store import MemoryStore, open
from .time import Basis
from .write import BatchResult, WriteResult

__version__ = "0.1.0"

__all__ = [
    "AuditEvent", "Authorization", "Basis", "BatchResult", "Candidate", "ConflictError", "Decision", "Envelope",
    "Episode", "Escalation", "Fact", "Hit", "LakehouseError", "MemoryStore", "Note", "PermissionDenied", "Policy",
    "Preference", "Principal", "Redactor", "Reference", "Scope", "StaleGeneration", "StoreError",
    "ValidationError", "WriteResult", "__version__", "authorize", "open",
]
