"""`memory_lakehouse.__all__` is the public contract (API.md): keep it honest."""

import memory_lakehouse as ml

API_NAMES = [  # the names ../shared/API.md promises
    "open",
    "Scope",
    "Principal",
    "Fact",
    "Preference",
    "Episode",
    "Reference",
    "Policy",
    "Note",
    "LakehouseError",
    "ValidationError",
    "PermissionDenied",
    "StaleGeneration",
    "Escalation",
    "ConflictError",
    "StoreError",
]
STORE_METHODS = [
    "write",
    "write_many",
    "propose",
    "approve",
    "retract",
    "generation",
    "recall",
    "get_fact",
    "episodes",
    "context",
    "resolve_policy",
    "replay",
    "audit",
    "forget",
    "purge",
    "rebuild_index",
    "tracer",
    "batch",
    "get",
    "list",
    "history",
    "pending",
]


def test_every_name_in_all_is_importable():
    for name in ml.__all__:
        assert hasattr(ml, name), name


def test_all_lists_every_public_name_of_the_package():
    public = {n for n in dir(ml) if not n.startswith("_") and not isinstance(getattr(ml, n), type(ml))}
    assert public <= set(ml.__all__), public - set(ml.__all__)


def test_the_api_contract_names_are_exported():
    assert set(API_NAMES) <= set(ml.__all__)
    for method in STORE_METHODS:
        assert callable(getattr(ml.MemoryStore, method)), method


def test_errors_share_one_base_and_match_builtins():
    for err in (
        ml.ValidationError,
        ml.PermissionDenied,
        ml.StaleGeneration,
        ml.Escalation,
        ml.ConflictError,
        ml.StoreError,
    ):
        assert issubclass(err, ml.LakehouseError)
    assert issubclass(ml.ValidationError, ValueError)
    assert issubclass(ml.PermissionDenied, PermissionError)
