"""Secret and PII scanning: what must never reach disk.

The write path runs every text field of a record through `Redactor.redact` before
anything is serialised, so a secret never lands in a data file, the log, the index or
an embedding cache. Patterns are deliberately conservative (few false positives):
card numbers must pass the Luhn check, SSNs the issuing rules, phone numbers need
separators or a leading ``+`` and 8 to 15 digits, and a credential named in words
("password hunter2") needs a value that looks like one. Dates, versions, times,
IP addresses and order ids are left alone (see tests/test_redact.py).

>>> Redactor().redact("call me with Bearer abcdefghijklmnopqrstuvwxyz012345")[0]
'call me with [REDACTED:bearer_token]'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from re import Pattern

import pyarrow as pa
import pyarrow.compute as pc

_PATTERNS: dict[str, str] = {
    "private_key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    "bearer_token": r"\bBearer\s+[A-Za-z0-9_\-\.=+/]{16,}",
    "jwt": r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "api_key": (
        r"\b(?:sk|pk|rk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9]{16,}\b"
        r"|\bsk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_\-]{20,}"
        r"|\bgh[pousr]_[A-Za-z0-9]{30,}\b"
        r"|\bxox[abposr]-[A-Za-z0-9-]{10,}\b"
        r"|\bAIza[0-9A-Za-z_\-]{35}\b"
    ),
    "credential_assignment": (
        r"(?i)\b(?:api[_-]?key|secret|password|passwd|token|access[_-]?key)\s*[:=]\s*['\"]?[^\s'\"]{8,}"
    ),
    # "password hunter2", "password: abc", "api key is k-123": a credential named in words. Without
    # ":" or "=", the value must look like one (a digit or a symbol): "password reset" stays.
    "credential_phrase": (
        r"(?i)\b(?:password|passwd|pwd|passcode|passphrase|api[ _-]?key|secret[ _-]?key|access[ _-]?token"
        r"|auth[ _-]?token)(?:\s*[:=]\s*['\"]?[^\s'\"]{3,}"
        r"|\s+(?:is\s+|was\s+)?['\"]?(?=[^\s'\"]*[0-9!@#$%^&*_+=~?/\\-])[^\s'\"]{4,})"
    ),
    "card_number": r"\b(?:\d[ -]?){12,18}\d\b",
    # US SSN, dashed only (a bare nine-digit number is an order id as often as not)
    "ssn": r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])",
    # +1 415 555 0100, (415) 555-0100, 415-555-0100, 415.555.0100; +44 20 7946 0958, +14155550100.
    # Groups need separators (or a leading +): dates, versions, times and ids have other shapes.
    "phone_number": (
        r"(?<![\w+.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-])"
        r"|(?<![\w+])\+\d{1,3}(?:[ .-]?\d{1,4}){2,5}(?![\w.-])"
    ),
    "email": r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",
}

#: What each kind cannot match without: the quick look, run over a whole batch through RE2
#: (`Redactor.suspects`), so clean text costs one fast scan. Each must be implied by its pattern.
_TRIGGERS: dict[str, str] = {
    "private_key": r"BEGIN",
    "bearer_token": r"Bearer",
    "jwt": r"eyJ",
    "aws_access_key": r"AKIA|ASIA",
    "api_key": r"[spr]k[-_]|gh[pousr]_|xox|AIza",
    "credential_assignment": r"(?i:key|secret|passwd|password|token)\s*[:=]",
    "credential_phrase": r"(?i:passw|pwd|passcode|passphrase|api.?key|secret.?key|access.?token|auth.?token)",
    "card_number": r"\d{4}[ -]?\d{4}",
    "ssn": r"\d{3}-\d{2}-\d{4}",
    "phone_number": r"\d{3}[ .-]\d{4}|\+\d",
    "email": r"@[A-Za-z0-9.-]*\.",  # not a bare "@": writers are named like "summariser@v3"
}

SECRET_KINDS: tuple[str, ...] = (
    "private_key",
    "bearer_token",
    "jwt",
    "aws_access_key",
    "api_key",
    "credential_assignment",
    "credential_phrase",
    "card_number",
)
PII_KINDS: tuple[str, ...] = ("ssn", "phone_number", "email")

#: What `Redactor()` removes: every secret kind and every PII kind.
DEFAULT_KINDS: tuple[str, ...] = SECRET_KINDS + PII_KINDS

#: From how many texts `Redactor.suspects` scans through Arrow: its RE2 scan compiles the
#: pattern per call (~0.5 ms), and Python's scan costs ~6-13 µs a text of a memory's size.
ARROW_SCAN_FROM = 64


def _scoped(pattern: str) -> str:
    """Move a leading global flag like ``(?i)`` into a scoped group so patterns can be joined."""
    match = re.match(r"^\(\?([aiLmsux]+)\)", pattern)
    return f"(?{match.group(1)}:{pattern[match.end() :]})" if match else pattern


def _luhn_ok(digits: str) -> bool:
    """A card number: 13 to 19 digits, a major network's first digit (2-6), the Luhn check.

    The first digit keeps millisecond timestamps (13 digits starting with 1 until 2033)
    out, a tenth of which pass the Luhn check.
    """
    nums = [int(c) for c in digits if c.isdigit()]
    if not 13 <= len(nums) <= 19 or not 2 <= nums[0] <= 6:
        return False
    total = 0
    for i, n in enumerate(reversed(nums)):
        if i % 2:
            n *= 2
            if n > 9:
                n -= 9
        total += n
    return total % 10 == 0


def _digits(text: str) -> list[int]:
    return [int(c) for c in text if c.isdigit()]


def _phone_ok(text: str) -> bool:
    return 8 <= len(_digits(text)) <= 15  # E.164 numbers: at most 15 digits


def _ssn_ok(text: str) -> bool:
    """Issued SSNs: area not 000, 666 or 9xx; group not 00; serial not 0000."""
    d = "".join(str(n) for n in _digits(text))
    return d[:3] not in ("000", "666") and d[0] != "9" and d[3:5] != "00" and d[5:] != "0000"


#: Checks a match must pass to count (a pattern alone would take too much).
_VALID: dict[str, Callable[[str], bool]] = {"card_number": _luhn_ok, "phone_number": _phone_ok, "ssn": _ssn_ok}


@dataclass
class Redactor:
    """Replaces secrets and personal data with a marker naming the kind.

    ``kinds`` picks the built-in kinds (default `DEFAULT_KINDS`: every secret kind,
    US SSNs, phone numbers and e-mail addresses); ``emails=False`` drops e-mail
    addresses from them. ``extra`` adds patterns of your own:
    ``{"employee_id": r"\\bE\\d{6}\\b"}``.

    >>> Redactor(kinds=SECRET_KINDS).redact("call +1 415 555 0100")[0]
    'call +1 415 555 0100'
    """

    emails: bool = True
    extra: dict[str, str] = field(default_factory=dict)
    kinds: Sequence[str] | None = None

    def __post_init__(self) -> None:
        chosen = DEFAULT_KINDS if self.kinds is None else tuple(self.kinds)
        unknown = sorted(set(chosen) - set(_PATTERNS))
        if unknown or isinstance(self.kinds, str):
            raise ValueError(
                f"unknown redaction kind(s) {unknown or self.kinds!r}: choose from {', '.join(DEFAULT_KINDS)}"
            )
        kinds = [k for k in chosen if self.emails or k != "email"]
        patterns = {k: _PATTERNS[k] for k in kinds}
        patterns.update(self.extra)
        for name in patterns:
            if not name.isidentifier():
                raise ValueError(f"redaction pattern name {name!r} must be an identifier")
        self.active: tuple[str, ...] = tuple(patterns)
        # one alternation, one scan per text: leftmost match wins, earlier kinds first at a tie
        self._combined: Pattern[str] = re.compile(
            "|".join(f"(?P<{name}>{_scoped(pattern)})" for name, pattern in patterns.items())
        )
        # a credential named in words ("my API key sk_live_...") is reported as the kind of its value
        specific = {k: p for k, p in patterns.items() if k != "credential_phrase"}
        self._specific: Pattern[str] | None = (
            re.compile("|".join(f"(?P<{name}>{_scoped(pattern)})" for name, pattern in specific.items()))
            if specific
            else None
        )
        # a cheap first look so clean text (the common case) costs one fast scan; every
        # built-in pattern needs its trigger to match at all
        triggers = [_TRIGGERS[k] for k in kinds]
        self._quick: Pattern[str] | None = None if self.extra or not triggers else re.compile("|".join(triggers))

    def redact(self, text: str) -> tuple[str, tuple[str, ...]]:
        """Return the cleaned text and the kinds of what was removed."""
        if not text or (self._quick is not None and not self._quick.search(text)):
            return text, ()
        found: list[str] = []

        def replace(match: re.Match[str]) -> str:
            kind = match.lastgroup or "secret"
            valid = _VALID.get(kind)
            if valid is not None and not valid(match.group(0)):
                return match.group(0)
            if kind == "credential_phrase" and self._specific is not None:
                inner = self._specific.search(match.group(0))
                if (
                    inner is not None
                    and inner.lastgroup
                    and inner.lastgroup in _VALID
                    and not _VALID[inner.lastgroup](inner.group(0))
                ):
                    inner = None
                if inner is not None and inner.lastgroup:
                    kind = inner.lastgroup
            found.append(kind)
            return f"[REDACTED:{kind}]"

        cleaned = self._combined.sub(replace, text)
        return cleaned, tuple(dict.fromkeys(found))

    def suspects(self, texts: list[str]) -> set[int]:
        """Indices of *texts* that may hold something to redact (the quick look over each).

        The batched write path runs the quick look over all of a batch's texts at once,
        then redacts only the texts it flags with the full patterns. From `ARROW_SCAN_FROM`
        texts on, the look is one vectorised scan (RE2 through Arrow, ~10x faster than a
        Python loop over thousands); below, Python's own scan of the pattern: Arrow
        compiles the pattern on every call (~0.5 ms), which was a tenth of a single write.
        """
        if self._quick is None:
            return set(range(len(texts)))
        if len(texts) < ARROW_SCAN_FROM:
            search = self._quick.search
            return {i for i, text in enumerate(texts) if search(text)}
        return self._scan_arrow(texts)

    def _scan_arrow(self, texts: list[str]) -> set[int]:
        """`suspects` as one RE2 scan through Arrow (tests/test_redact.py compares the two)."""
        assert self._quick is not None
        # Python's \d matches any Unicode digit; say so to RE2, whose \d is ASCII only
        flagged = pc.match_substring_regex(pa.array(texts, pa.string()), self._quick.pattern.replace(r"\d", r"\p{Nd}"))
        return set(pc.indices_nonzero(flagged).to_pylist())

    def findings(self, text: str) -> tuple[str, ...]:
        return self.redact(text)[1]
