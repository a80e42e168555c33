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
}
MORE = ["API_KEY: 0123456789abcdef", "Token=abcdefghij123", "secret : 'zyxwvutsrq'", "passwd:correcthorse",
        "access-key = AbCdEfGhIjKl", "ghp_" + "a1" * 18, "xoxb-1234567890-abcdef", "AIza" + "B" * 35,
        "4111 1111 1111 1111", "٤١١١ ١١١١ ١١١١ ١١١١"]
UNGUARDED = Redactor()
UNGUARDED._quick = None  # the full patterns on every text: the reference


def test_every_builtin_kind_is_found_and_flagged_by_the_quick_look():
    redactor = Redactor()
    for kind, secret in EXAMPLES.items():
        text = f"note: {secret} end"
        assert kind in redactor.redact(text)[1], kind
        assert redactor.suspects(["clean text", text]) == {1}, kind


@settings(max_examples=300, deadline=None)
@given(before=st.text(max_size=12), after=st.text(max_size=12),
       secret=st.sampled_from(list(EXAMPLES.values()) + MORE))
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
