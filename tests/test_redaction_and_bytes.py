"""Secrets never reach disk, and the transaction log never carries content.

Every file under the store root is scanned twice: as raw bytes, and (for parquet, whose
pages may be compressed) value by value after reading it back with pyarrow. Each scan
is shown not to be vacuous: the redaction markers and the plain canaries are found in
the data files by the very same scan.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _support import MEMBER, day, episode, fact, files_under, parquet_strings
from deltalake import DeltaTable

import memory_lakehouse as ml
from memory_lakehouse.records import SPECS

BEARER_BODY = "QmVhcmVyU2VjcmV0VG9rZW4xMjM0NTY3"
API_KEY_BODY = "Zx9Yw8Vu7Ts6Rq5Po4Nm"
PEM_BODY = "MIIEowIBAAKCAQEAcanaryPEMbodyQ2FuYXJ5"
BEARER = f"Bearer {BEARER_BODY}"
API_KEY = f"sk-proj-{API_KEY_BODY}"
CARD = "4111 1111 1111 1111"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
SECRETS = (BEARER_BODY, API_KEY_BODY, PEM_BODY, CARD, CARD.replace(" ", ""))

VALUE_CANARY = "CANARY-7f3a9-VALUE"
SUBJECT_CANARY = "subject-canary-91c2"
SYMPTOM_CANARY = "CANARY-symptom-4d2e"
CONTENT_CANARY = "CANARY-content-b81f"
CANARIES = (VALUE_CANARY, SUBJECT_CANARY, SYMPTOM_CANARY, CONTENT_CANARY)


def occurrences(root: Path, needles, *, where=lambda p: True) -> dict[str, set[str]]:
    """Which files under *root* hold each needle, in their raw bytes or in any parquet value."""
    found: dict[str, set[str]] = {n: set() for n in needles}
    for path in files_under(root):
        if not where(path):
            continue
        data = path.read_bytes()
        texts = [data.decode("utf-8", errors="ignore")]
        if path.suffix == ".parquet":
            texts.extend(parquet_strings(path))
        for n in needles:
            if any(n in t for t in texts) or n.encode() in data:
                found[n].add(str(path.relative_to(root)))
    return found


def in_log(path: Path) -> bool:
    return "_delta_log" in path.parts


def in_data(path: Path) -> bool:
    return path.suffix == ".parquet" and not in_log(path)


def checkpoint_every_table(root: Path) -> None:
    for table in SPECS:
        DeltaTable(str(root / table)).create_checkpoint()


@pytest.fixture
def secret_store(store, clock):
    clock.set(day(2))
    results = {
        "fact": store.write(
            fact(
                "user:42",
                "billing_api",
                f"use {BEARER} for the billing API",
                day(1),
                evidence=f"ticket says {API_KEY}",
                reason=f"pasted {CARD}",
            ),
            by=MEMBER,
            reason=f"the customer pasted {BEARER}",
        ),
        "nested": store.write(
            fact("user:42", "notes", {"lines": [f"token {BEARER}", f"card {CARD}"]}, day(1)), by=MEMBER
        ),
        "episode": store.write(
            episode(
                "checkout",
                f"deploy failed: key {API_KEY} rejected",
                "failed",
                day(1),
                action=f"rotated the key and retried with {BEARER}",
            ),
            by=MEMBER,
        ),
        "reference": store.write(
            ml.Reference(
                "https://wiki.example/keys", "Key handling", f"card on file {CARD}\n{PEM}", day(1), source="wiki"
            ),
            by=MEMBER,
        ),
        "preference": store.write(
            ml.Preference("user:42", "contact", f"call with {API_KEY}", day(1), source="chat"), by=MEMBER
        ),
        "note": store.write(ml.Note("sess-1", "scratch", f"{PEM}"), by=MEMBER),
    }
    store.recall("billing key card", by=MEMBER)  # let every derived file (index, caches) be written
    checkpoint_every_table(Path(store.root))
    return store, results


def test_write_results_list_what_was_redacted(secret_store):
    _, res = secret_store
    assert set(res["fact"].redacted) >= {"bearer_token", "api_key", "card_number"}
    assert set(res["nested"].redacted) == {"bearer_token", "card_number"}
    assert set(res["episode"].redacted) == {"api_key", "bearer_token"}
    assert set(res["reference"].redacted) == {"card_number", "private_key"}
    assert res["preference"].redacted == ("api_key",)
    assert res["note"].redacted == ("private_key",)


def test_no_secret_reaches_any_byte_under_the_store_root(secret_store):
    store, _ = secret_store
    root = Path(store.root)
    leaks = {s: where for s, where in occurrences(root, SECRETS).items() if where}
    assert leaks == {}
    markers = occurrences(
        root,
        ["[REDACTED:bearer_token]", "[REDACTED:api_key]", "[REDACTED:card_number]", "[REDACTED:private_key]"],
        where=in_data,
    )
    assert all(markers.values()), markers  # the scan reads the data files: the markers are there


def test_what_is_served_back_is_the_redacted_text(secret_store):
    store, _ = secret_store
    got = store.get_fact("user:42", "billing_api", by=MEMBER)
    assert got.value == "use [REDACTED:bearer_token] for the billing API"
    assert BEARER_BODY not in (got.reason or "") and CARD not in (got.reason or "")
    notes = store.get_fact("user:42", "notes", by=MEMBER).value
    assert notes == {"lines": ["token [REDACTED:bearer_token]", "card [REDACTED:card_number]"]}


def test_a_clean_text_is_stored_unchanged_and_nothing_is_reported(store, clock):
    clock.set(day(2))
    text = "order 12345 shipped; call back at 10:30 about ticket T-4812"
    res = store.write(fact("user:42", "status", text, day(1)), by=MEMBER)
    assert res.redacted == ()
    assert store.get_fact("user:42", "status", by=MEMBER).value == text


def test_content_and_subjects_never_reach_the_transaction_log(store, clock):
    clock.set(day(2))
    store.write(fact(SUBJECT_CANARY, "plan", VALUE_CANARY, day(1), evidence="CRM-1"), by=MEMBER)
    store.write(fact(SUBJECT_CANARY, "plan", VALUE_CANARY + "-v2", day(2)), by=MEMBER, reason="upgrade")
    store.write_many(
        [
            episode("checkout", SYMPTOM_CANARY, "failed", day(1), subject=SUBJECT_CANARY),
            ml.Reference(
                "https://wiki.example/canary", "Canary", CONTENT_CANARY, day(1), subject=SUBJECT_CANARY, source="wiki"
            ),
            ml.Preference(SUBJECT_CANARY, "tone", VALUE_CANARY, day(1), source="chat"),
        ],
        by=MEMBER,
    )
    checkpoint_every_table(Path(store.root))
    root = Path(store.root)
    assert list(root.glob("*/_delta_log/*.checkpoint.parquet"))

    in_the_log = occurrences(root, CANARIES, where=in_log)
    assert {c: w for c, w in in_the_log.items() if w} == {}
    in_the_data = occurrences(root, CANARIES, where=in_data)
    assert all(in_the_data.values()), in_the_data  # the same scan finds them where they belong


def test_file_statistics_in_the_log_cover_only_time_columns(store, clock):
    clock.set(day(2))
    store.write(fact(SUBJECT_CANARY, "plan", VALUE_CANARY, day(1)), by=MEMBER)
    for table in SPECS:
        config = DeltaTable(f"{store.root}/{table}").metadata().configuration
        assert config["delta.dataSkippingStatsColumns"] == "valid_from,valid_to,expires_at"
        assert config.get("delta.enableChangeDataFeed", "false") == "false"
    adds = DeltaTable(f"{store.root}/fact").get_add_actions(flatten=True)
    stat_columns = {c.split(".", 1)[1] for c in adds.schema.names if c.startswith(("min.", "max."))}
    assert "valid_from" in stat_columns and stat_columns <= {"valid_from", "valid_to", "expires_at"}


def test_a_secret_in_the_source_or_the_reason_never_reaches_the_log(store, clock):
    clock.set(day(2))
    res = store.write(
        fact("user:42", "plan", "Pro", day(1), source=f"webhook?auth={BEARER}"),
        by=MEMBER,
        reason=f"synced with {API_KEY}",
    )
    assert "bearer_token" in res.redacted
    store.retract(res.record_id, by=MEMBER, reason=f"wrong key {API_KEY}")
    root = Path(store.root)
    assert {s: w for s, w in occurrences(root, SECRETS).items() if w} == {}
    assert occurrences(root, ["[REDACTED:bearer_token]"], where=in_log)["[REDACTED:bearer_token]"]


def test_a_batch_redacts_each_record_as_a_single_write_would(store, clock):
    """write_many scans the whole batch at once; each record must come out as `Redactor.redact` makes it,
    clean neighbours untouched, and a card number written in non-ASCII digits caught too."""
    clock.set(day(2))
    arabic_card = "".join(chr(0x0660 + int(c)) if c.isdigit() else c for c in CARD)
    values = [
        "plain words",
        f"use {BEARER}",
        "whiskey tango",
        f"card {arabic_card}",
        "",
        "mail ann@example.org",
        f"{API_KEY} and {CARD}",
        "nothing here either",
    ]
    batch = store.write_many([fact(f"user:{i}", "note", v or "-", day(1)) for i, v in enumerate(values)], by=MEMBER)
    redactor = ml.Redactor()
    for i, (value, result) in enumerate(zip(values, batch, strict=True)):
        expected, kinds = redactor.redact(value or "-")
        assert store.get_fact(f"user:{i}", "note", by=MEMBER).value == expected
        assert set(result.redacted) == set(kinds)
    assert "[REDACTED:card_number]" in store.get_fact("user:3", "note", by=MEMBER).value


def test_phone_numbers_ssns_and_passwords_in_words_never_reach_a_byte(store, clock):
    clock.set(day(2))
    pii = ("415 555 0100", "555-0100", "123-45-6789", "hunter2")
    result = store.write(
        fact(
            "user:7",
            "contact",
            "call +1 415 555 0100 or (415) 555-0100; SSN 123-45-6789",
            day(1),
            evidence="password hunter2 was in the ticket",
        ),
        by=MEMBER,
    )
    assert set(result.redacted) == {"phone_number", "ssn", "credential_phrase"}
    store.recall("contact call", by=MEMBER)
    checkpoint_every_table(Path(store.root))
    assert {s: w for s, w in occurrences(Path(store.root), pii).items() if w} == {}
