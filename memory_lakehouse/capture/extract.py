"""Extraction: which lines of a conversation become memory, behind one `Extractor` protocol.

The default `RuleExtractor` needs no model. It applies seed 001's extraction
boundaries to each sentence of each turn, in this order (the first rule that fires
decides; each is named, and `classify` says which one fired):

==================== ====== =========================================================
rule                 keeps  fires on
==================== ====== =========================================================
secret               drop   anything the redactor flags (keys, tokens, card numbers)
trace                drop   stack traces, ``Traceback``, ``File "…", line N``, log lines
greeting             drop   greetings, thanks, acknowledgements and other filler
speculation          drop   hedges ("maybe it's the pool?", "I think", "might") and
                            questions
correction           keep   "actually …", "correction: …", "no, it's …"
fact                 keep   a statement naming an attribute: "I live in …", "I moved to
                            …", "I'm on the … plan", "I upgraded to …", "my X is Y"
preference           keep   "my preferred X is Y" (an attribute), "I prefer …", "I'd
                            rather …", "always/never …", "please don't …"
constraint           keep   "I can't …", "we must …", "X is not allowed"
configuration        keep   verified settings: "confirmed: …", "X is set to Y",
                            "verified …", "works with …"
goal                 keep   a goal with a deadline: "ship X by Friday", "deadline …"
other                drop   anything else: a default extractor keeps only signal
==================== ====== =========================================================

What is kept becomes a `Fact` or a `Preference` when the rule names an attribute
(reconcile then supersedes the old value of that slot), else a `Memory` (free text,
deduplicated by content). Every extracted record is ``derived_from`` the turn it came
from and carries ``source="extractor:<name>"``; its subject is the capture's subject,
else the turn's.

An extractor is any object with ``name`` and ``extract(turns, subject=None)`` returning
records; `agent_loop.extractor.ModelExtractor` is one that asks the local model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..conversation import Memory, Turn
from ..records import Envelope, Fact, Preference
from ..redact import Redactor


@runtime_checkable
class Extractor(Protocol):
    """What capture calls on a session's stored turns; it returns candidate records.

    Each record must be ``derived_from`` one or more of the given turns' ids (capture
    refuses one that is not, so forgetting a speaker always reaches what was extracted).
    """

    name: str

    def extract(self, turns: Sequence[Turn], subject: str | None = None) -> list[Envelope]: ...


@dataclass(frozen=True)
class Verdict:
    """What the default extractor decided about one sentence, and which rule decided it."""

    keep: bool
    rule: str
    attribute: str | None = None
    value: str | None = None
    text: str | None = None  # the statement a `Memory` keeps


_I = re.IGNORECASE
TRACE = [
    re.compile(p, _I)
    for p in (
        r"traceback \(most recent call last\)",
        r'^\s*file "[^"]+", line \d+',
        r"^\s*at [\w.$]+\([\w.]+:\d+\)",
        r"^\s*\w+(error|exception)(:|$)",
        r"^\s*\d{4}-\d{2}-\d{2}[ t][\d:.,]+\s+(debug|info|warn|warning|error|trace)\b",
        r"^\s*(debug|trace)\s*[:|\]]",
        r"^\s*\[(debug|info|trace)\]",
    )
]
GREETING = re.compile(
    r"^(hi|hey|hello|yo|hiya|good (morning|afternoon|evening)|thanks|thank you|thx|ty|cheers|ok(ay)?|cool|great|"
    r"nice|awesome|sure|got it|sounds good|lol|haha|hmm+|bye|see you|talk soon|take care|no worries|np|you're welcome|"
    r"how are you|how's it going|what's up)\b[\s,!.]*",
    _I,
)
SPECULATION = re.compile(
    r"\b(maybe|perhaps|possibly|probably|might|could it be|could be|i think|i guess|i suspect|not sure|i wonder|"
    r"my guess|seems like|wondering if|hypothes[ie]s)\b",
    _I,
)
CORRECTION = re.compile(r"^(actually|correction|to correct|no,|not \w+ but|sorry, i meant|i meant)\b[,:]?\s*(.+)", _I)
FACT_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bi (?:now )?live in ([A-Z][\w .'-]+)", _I), "city"),
    (re.compile(r"\bi(?:'ve| have)? (?:just )?moved to ([A-Z][\w .'-]+)", _I), "city"),
    (re.compile(r"\bi(?:'m| am) (?:now )?on the ([\w .'-]+?) plan\b", _I), "plan"),
    (
        re.compile(
            r"\bi(?:'ve| have)? (?:just )?(?:upgraded|downgraded|switched) to (?:the )?([\w .'-]+?)(?: plan)?$", _I
        ),
        "plan",
    ),
    (re.compile(r"\bi work (?:at|for) ([A-Z][\w .&'-]+)", _I), "employer"),
    (re.compile(r"\bmy name is ([A-Z][\w .'-]+)", _I), "name"),
]
MY_X_IS = re.compile(r"^my ((?:\w+ ){0,2}\w+) (?:is|are) (?:now )?(.+)$", _I)
PREFERRED = re.compile(r"\bmy (?:preferred|favou?rite) ((?:\w+ ){0,2}\w+) (?:is|are) (.+)$", _I)
PREFERENCE = re.compile(
    r"\b(i (?:really )?prefer|i'd rather|i would rather|i (?:really )?like|i love|i hate|"
    r"i don't like|i dislike|please (?:always|never|don't|do not)|always|never)\b",
    _I,
)
CONSTRAINT = re.compile(
    r"\b(i can't|i cannot|i can not|we can't|we cannot|i must|we must|must not|"
    r"is not allowed|are not allowed|is required|are required|i'm allergic|i am allergic|"
    r"no more than|at most|at least)\b",
    _I,
)
CONFIGURATION = re.compile(
    r"^(confirmed|verified)\b[:,]?\s*(.+)|\b(is|are) (?:now )?set to\b|\bworks with\b|"
    r"\bverified that\b|\bconfirmed that\b",
    _I,
)
DEADLINE = re.compile(
    r"\b(by|before|due|until|deadline)\b.{0,40}\b(monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday|tomorrow|tonight|next (?:week|month|quarter|year)|end of (?:the )?"
    r"(?:day|week|month|quarter|year)|q[1-4]|\d{4}-\d{2}-\d{2}|\d{1,2}(?:st|nd|rd|th)?|"
    r"january|february|march|april|may|june|july|august|september|october|november|december)\b",
    _I,
)
GOAL = re.compile(
    r"\b(goal|need to|have to|plan to|want to|going to|will|must|ship|launch|finish|deliver|submit|"
    r"deadline|due)\b",
    _I,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_REDACTOR = Redactor()


def _clean(value: str) -> str:
    return value.strip().rstrip(".!").strip()


def classify(sentence: str) -> Verdict:
    """The default extractor's verdict on one sentence (the table in the module docstring)."""
    line = sentence.strip()
    if not line:
        return Verdict(False, "other")
    if "[REDACTED:" in line or _REDACTOR.redact(line)[1]:  # stored turns come back already redacted
        return Verdict(False, "secret")
    if any(p.search(line) for p in TRACE):
        return Verdict(False, "trace")
    lead = GREETING.match(line)
    if lead:  # "Thanks, I moved to Austin" keeps what follows the greeting; "Thanks so much!" keeps nothing
        rest = classify(line[lead.end() :]) if line[lead.end() :].strip() else Verdict(False, "other")
        return rest if rest.rule != "other" else Verdict(False, "greeting")
    if len(re.findall(r"\w+", line)) < 3:
        return Verdict(False, "greeting")
    if SPECULATION.search(line) or line.endswith("?"):
        return Verdict(False, "speculation")
    corrected = CORRECTION.match(line)
    if corrected:
        inner = classify(corrected.group(2))
        if inner.keep and inner.attribute:
            return Verdict(True, "correction", inner.attribute, inner.value)
        return Verdict(True, "correction", text=_clean(line))
    core = line.rstrip(" .!")
    for pattern, attribute in FACT_PATTERNS:
        m = pattern.search(core)
        if m:
            return Verdict(True, "fact", attribute, _clean(m.group(1)))
    m = PREFERRED.search(line)
    if m:
        return Verdict(True, "preference", m.group(1).lower().replace(" ", "_"), _clean(m.group(2)))
    if PREFERENCE.search(line):
        return Verdict(True, "preference", text=_clean(line))
    if CONSTRAINT.search(line):
        return Verdict(True, "constraint", text=_clean(line))
    if CONFIGURATION.search(line):
        return Verdict(True, "configuration", text=_clean(line))
    if DEADLINE.search(line) and GOAL.search(line):
        return Verdict(True, "goal", text=_clean(line))
    m = MY_X_IS.match(line)
    if m:
        return Verdict(True, "fact", m.group(1).lower().replace(" ", "_"), _clean(m.group(2)))
    return Verdict(False, "other")


def sentences(text: str) -> list[str]:
    """A turn's sentences; a turn holding a stack trace is one trace (never split into keepable lines)."""
    if any(p.search(line) for line in text.splitlines() for p in TRACE):
        return [text]
    return [s for s in _SENTENCE.split(text) if s.strip()]


class RuleExtractor:
    """The default extractor: seed 001's boundaries as rules, no model (see the module docstring)."""

    name = "rules@1"
    #: The rules, for extractors that build on them (a model extractor keeps the hard boundaries).
    verdict = staticmethod(classify)
    sentences = staticmethod(sentences)

    def extract(self, turns: Sequence[Turn], subject: str | None = None) -> list[Envelope]:
        out: list[Envelope] = []
        for turn in turns:
            if turn.role not in ("user", "assistant") or turn.record_id is None:
                continue
            about = subject or turn.subject_name
            for sentence in sentences(turn.text):
                verdict = classify(sentence)
                if verdict.keep:
                    out.append(to_record(verdict, turn, about, self.name))
        return out


def to_record(verdict: Verdict, turn: Turn, subject: str, extractor: str) -> Envelope:
    """The record a kept verdict becomes: derived from its turn, valid from when it was said."""
    assert turn.record_id is not None
    common: dict[str, Any] = dict(
        source=f"extractor:{extractor}",
        derived_from=(turn.record_id,),
        evidence=f"{turn.session_id}#{turn.position}",
        reason=f"stated in session {turn.session_id}, turn {turn.position}",
        authority="customer_claim" if turn.role == "user" else "model_guess",
    )
    if verdict.attribute and verdict.value:
        if verdict.rule == "preference":
            return Preference(subject, verdict.attribute, verdict.value, turn.said_at, **common)
        return Fact(subject, verdict.attribute, verdict.value, turn.said_at, **common)
    return Memory(subject, verdict.text or "", turn.said_at, **common)
