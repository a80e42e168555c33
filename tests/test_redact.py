"""The redactor's quick look (a cheap trigger scan, batched through RE2 on the write path)
must never hide a secret the full patterns would remove."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_lakehouse.redact import Redactor

EXAMPLES = {
    "private_key": "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----",
    "bearer_token": "Bearer abcdefghijklmnop0123456789",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "api_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "credential_assignment": "password = hunter2hunter2",
    "card_number": "4111-1111-1111-1111",
    "email": "ann.lee@example.org",
    "phone_number": "+1 415 555 0100",
    "ssn": "123-45-6789",
    "credential_phrase": "password hunter2",
}
MORE = [
    "API_KEY: 0123456789abcdef",
    "Token=abcdefghij123",
    "secret : 'zyxwvutsrq'",
    "passwd:correcthorse",
    "access-key = AbCdEfGhIjKl",
    "ghp_" + "a1" * 18,
    "xoxb-1234567890-abcdef",
    "AIza" + "B" * 35,
    "4111 1111 1111 1111",
    "٤١١١ ١١١١ ١١١١ ١١١١",
    "(415) 555-0100",
    "415-555-0100",
    "415.555.0100",
    "+44 20 7946 0958",
    "+14155550100",
    "password: abc1",
    "Password is Tr0ub4dor",
    "passwd=xyz12",
    "api key: k-12345",
    "API-KEY is 9f8e7d",
    "secret key: s3cr3t",
    "access token = tok_123",
    "SSN 078-05-1120",
]
UNGUARDED = Redactor()
UNGUARDED._quick = None  # the full patterns on every text: the reference


def test_every_builtin_kind_is_found_and_flagged_by_the_quick_look():
    redactor = Redactor()
    for kind, secret in EXAMPLES.items():
        text = f"note: {secret} end"
        assert kind in redactor.redact(text)[1], kind
        assert redactor.suspects(["clean text", text]) == {1}, kind


@settings(max_examples=300, deadline=None)
@given(before=st.text(max_size=12), after=st.text(max_size=12), secret=st.sampled_from(list(EXAMPLES.values()) + MORE))
def test_the_quick_look_never_changes_what_is_redacted(before, after, secret):
    text = f"{before} {secret} {after}"
    redactor = Redactor()
    assert redactor.redact(text) == UNGUARDED.redact(text)
    flagged = redactor.suspects([text])
    if UNGUARDED.redact(text)[1]:
        assert flagged == {0}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=8))
def test_suspects_flags_every_text_the_full_patterns_would_change(texts):
    redactor = Redactor()
    flagged = redactor.suspects(texts)
    for i, text in enumerate(texts):
        if UNGUARDED.redact(text)[1]:
            assert i in flagged


# ---------------------------------------------------------------- phones, SSNs, credentials in words

REDACTED = {
    "call +1 415 555 0100 after 5pm": "phone_number",
    "office (415) 555-0100": "phone_number",
    "cell 415-555-0100": "phone_number",
    "fax 415.555.0100": "phone_number",
    "London +44 20 7946 0958": "phone_number",
    "sms to +14155550100": "phone_number",
    "her SSN is 123-45-6789.": "ssn",
    "my password hunter2 works": "credential_phrase",
    "password: hunter2": "credential_phrase",
    "the password is hunter2!": "credential_phrase",
    "passwd=letmein": "credential_phrase",
    "api key: k-12345": "credential_phrase",
}

LEFT_ALONE = [
    "released 2026-12-01, deployed 2026-12-01T10:00:00Z, rolled back 2026-12-01T10:00:00+02:00",
    "dates 12/01/2026, 01.12.2026 and 2026 12 01",
    "version 1.2.3, v2.10.4, build 2026.12.1-rc.3",
    "order ORD-2026-000123, order #100234567, ticket INC-4421, invoice 2026-0042-17",
    "timestamps 1733011200 and 1733011200123, at 10:30:00.123",
    "ip 192.168.1.1 and 10.0.0.254, port 8080",
    "reset your password at the portal",
    "the password policy requires 12 characters",
    "the password was changed; api key rotation is due",
    "p99 went +21.5 ms, +100 requests, 3 + 4 = 7",
    "SSN-shaped but never issued: 000-12-3456, 666-12-3456, 123-00-4567, 123-45-0000",
    "short local number 555-0100 and extension x4421",
    "room 12-345-6789",
]


def test_phones_ssns_and_credentials_in_words_are_redacted():
    redactor = Redactor()
    for text, kind in REDACTED.items():
        cleaned, kinds = redactor.redact(text)
        assert kinds == (kind,), text
        assert f"[REDACTED:{kind}]" in cleaned
        assert redactor.suspects([text]) == {0}, text
    assert Redactor().redact("password hunter2")[0] == "[REDACTED:credential_phrase]"


def test_ordinary_numbers_and_words_are_left_alone():
    redactor = Redactor()
    for text in LEFT_ALONE:
        assert redactor.redact(text) == (text, ()), text


def test_the_kinds_are_configurable():
    from memory_lakehouse.redact import DEFAULT_KINDS, PII_KINDS, SECRET_KINDS

    assert set(DEFAULT_KINDS) == set(SECRET_KINDS) | set(PII_KINDS) >= {"phone_number", "ssn", "credential_phrase"}
    secrets_only = Redactor(kinds=SECRET_KINDS)
    assert secrets_only.redact("call +1 415 555 0100, SSN 123-45-6789") == ("call +1 415 555 0100, SSN 123-45-6789", ())
    assert secrets_only.redact("password hunter2")[1] == ("credential_phrase",)
    assert Redactor(emails=False).redact("ann@example.org")[1] == ()
    assert Redactor(kinds=["ssn"]).suspects(["+1 415 555 0100", "123-45-6789"]) == {1}
    import pytest

    with pytest.raises(ValueError, match="unknown redaction kind"):
        Redactor(kinds=["phone"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=40), st.sampled_from(list(EXAMPLES.values()) + MORE)), max_size=8))
def test_the_arrow_scan_of_a_large_batch_flags_what_the_python_scan_flags(texts):
    """A batch of `ARROW_SCAN_FROM` texts or more is looked at through RE2; fewer, by Python's re."""
    from memory_lakehouse.redact import ARROW_SCAN_FROM

    redactor = Redactor()
    assert redactor._scan_arrow(texts) == redactor.suspects(texts)
    padded = texts + ["clean text"] * ARROW_SCAN_FROM  # the same texts, past the threshold
    assert redactor.suspects(padded) == redactor.suspects(texts)
