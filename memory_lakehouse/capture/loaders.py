"""Loaders for conversation benchmarks: LongMemEval and LoCoMo JSON into turns.

Each session is written through the one write path as one commit, with the store clock
pinned at the session's date (`time.StoreClock.pinned`), in date order across every
file of the load: the turns of a session are known from its date on, and valid from it,
so ``as_of=question_date`` sees exactly the sessions held before the question.

* **Bad input** — a malformed file, an unparseable date, a turn with neither text nor a
  caption — raises one `ValidationError` naming the file, the item and the field, before
  anything is written: a load writes every session of its files or none.
* **Re-running** a load changes nothing: a turn's slot is its session and position, so
  the same turn again is a duplicate and a session of duplicates makes no commit.
* **Dates** carry no time zone in either format: they are read as UTC.
* A session dated earlier than a commit the store already holds cannot be written at
  its date (system time never goes backwards): it is written at the store's latest time
  and counted in `LoadReport.late_sessions`. Load the files of a benchmark together, into
  a store of their own.

The questions are not memory: they come back in `LoadReport.questions`, with each
question's date (LoCoMo has none: one day after its conversation's last session, the
protocol of ``../shared/data/README.md``) and its evidence as ``(session_id, position)``.

Formats (no benchmark data ships with the product; ``data/`` holds generated samples):

* **LongMemEval** — a JSON list of questions: ``question_id``, ``question_type``,
  ``question``, ``answer``, ``question_date``, ``haystack_session_ids``,
  ``haystack_dates``, ``haystack_sessions`` (lists of ``{"role", "content",
  "has_answer"?}``), ``answer_session_ids``; an id ending ``_abs`` is an abstention
  question. Questions share sessions: a session id is loaded once, at its earliest date.
  A turn's speaker is its role, so ``forget("user")`` forgets what the user said.
* **LoCoMo** — one conversation per file (or a list of them, or ``{"conversation":
  …, "qa": …}`` samples as in ``locomo10.json``): ``speaker_a``, ``speaker_b``,
  ``session_N`` turns ``{"speaker", "dia_id", "text", "blip_caption"?}``,
  ``session_N_date_time`` like ``"1:56 pm on 8 May, 2023"``, ``qa``. Session ``N`` of
  conversation ``C`` is ``C-session-N``; turn ``D<N>:<t>`` is at position ``t - 1``;
  a shared photo's caption is appended to the text.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..conversation import Turn
from ..errors import ValidationError
from ..progress import Progress
from ..scope import Principal, Scope

if TYPE_CHECKING:
    from ..store import MemoryStore

Format = Literal["longmemeval", "locomo"]
FORMATS: tuple[str, ...] = ("longmemeval", "locomo")


@dataclass(frozen=True)
class ParsedTurn:
    role: str
    speaker: str | None
    text: str
    position: int


@dataclass(frozen=True)
class Session:
    """One session of a benchmark file, parsed and checked, not yet written."""

    file: str
    session_id: str
    date: datetime
    turns: tuple[ParsedTurn, ...]


@dataclass(frozen=True)
class Question:
    """A benchmark question: what a harness asks after the load (never stored as memory)."""

    question_id: str
    question: str
    answer: Any
    question_date: datetime | None
    category: str
    evidence: tuple[tuple[str, int], ...] = ()  # (session_id, position) of the turns holding the answer
    answer_session_ids: tuple[str, ...] = ()
    abstention: bool = False


@dataclass(frozen=True)
class LoadReport:
    """What a load wrote: sessions, turns (new and already there), seconds, and the questions."""

    format: str
    files: tuple[str, ...]
    sessions: int
    turns: int
    inserted: int
    duplicates: int
    late_sessions: int
    seconds: float
    questions: tuple[Question, ...] = field(default=(), repr=False)

    @property
    def turns_per_second(self) -> float:
        return self.turns / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "files": list(self.files),
            "sessions": self.sessions,
            "turns": self.turns,
            "inserted": self.inserted,
            "duplicates": self.duplicates,
            "late_sessions": self.late_sessions,
            "seconds": self.seconds,
            "turns_per_second": round(self.turns_per_second, 1),
            "questions": len(self.questions),
        }

    def summary(self) -> str:
        line = (
            f"loaded {self.sessions} session(s), {self.turns} turn(s) from {len(self.files)} file(s) "
            f"({self.inserted} new, {self.duplicates} already stored) in {self.seconds:.2f} s "
            f"({self.turns_per_second:.0f} turns/s); {len(self.questions)} question(s)"
        )
        if self.late_sessions:
            line += (
                f"; WARNING: {self.late_sessions} session(s) recorded after their date (the store held later "
                "commits): as_of reads before then do not see them"
            )
        return line


def _bad(file: str, item: str, field_name: str, problem: str) -> ValidationError:
    return ValidationError(f"{file}: {item}: {field_name}: {problem}", field=field_name)


# --------------------------------------------------------------------------- dates

_LOCOMO_DATE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I)
_LME_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\(\w+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$")
_MONTHS = {
    m: i
    for i, m in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        1,
    )
}


def parse_date(value: Any, file: str, item: str, field_name: str) -> datetime:
    """A benchmark date (LoCoMo's ``1:56 pm on 8 May, 2023``, LongMemEval's ``2023/05/20 (Sat) 02:21``
    or ISO-8601) as an aware UTC datetime; anything else is one line naming where it was."""
    if not isinstance(value, str) or not value.strip():
        raise _bad(file, item, field_name, f"missing date (got {value!r})")
    try:
        m = _LOCOMO_DATE.match(value)
        if m:
            hour, minute, half, day, month, year = m.groups()
            month_no = _MONTHS.get(month.lower()) or next(
                (n for name, n in _MONTHS.items() if name.startswith(month.lower()) and len(month) >= 3), None
            )
            if month_no is None:
                raise ValueError(f"unknown month {month!r}")
            h = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
            return datetime(int(year), month_no, int(day), h, int(minute), tzinfo=UTC)
        m = _LME_DATE.match(value)
        if m:
            year, month, day, hour, minute = m.groups()
            return datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), tzinfo=UTC)
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except ValueError as exc:
        raise _bad(file, item, field_name, f"unparseable date {value!r} ({exc})") from exc


# --------------------------------------------------------------------------- parsing


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise _bad(path.name, f"line {exc.lineno}", "json", f"not JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise _bad(path.name, "file", "encoding", "not UTF-8 text") from exc


def parse_locomo(path: Path) -> tuple[list[Session], list[Question]]:
    """The sessions and questions of a LoCoMo file (see the module docstring)."""
    data = _read_json(path)
    samples = data if isinstance(data, list) else [data]
    sessions: list[Session] = []
    questions: list[Question] = []
    for n, sample in enumerate(samples):
        if not isinstance(sample, dict):
            raise _bad(path.name, f"conversation {n}", "conversation", "not a JSON object")
        conv = sample.get("conversation", sample)
        if not isinstance(conv, dict):
            raise _bad(path.name, f"conversation {n}", "conversation", "not a JSON object")
        name = str(sample.get("sample_id") or (path.stem if len(samples) == 1 else f"{path.stem}-{n}"))
        numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        if not numbers:
            raise _bad(path.name, f"conversation {name}", "session_1", "no sessions (is this a LoCoMo file?)")
        last: datetime | None = None
        for no in numbers:
            item = f"conversation {name} session_{no}"
            turns_raw = conv[f"session_{no}"]
            if not isinstance(turns_raw, list):
                raise _bad(path.name, item, f"session_{no}", "not a list of turns")
            if not turns_raw:
                continue
            date = parse_date(conv.get(f"session_{no}_date_time"), path.name, item, f"session_{no}_date_time")
            turns = []
            for i, t in enumerate(turns_raw):
                where = f"{item} turn {t.get('dia_id', i + 1) if isinstance(t, dict) else i + 1}"
                if not isinstance(t, dict):
                    raise _bad(path.name, where, "turn", "not a JSON object")
                raw_text, raw_caption = t.get("text"), t.get("blip_caption")
                text = raw_text if isinstance(raw_text, str) else ""
                caption = raw_caption if isinstance(raw_caption, str) else ""
                if not text.strip() and not caption.strip():
                    raise _bad(path.name, where, "text", "a turn with no text and no caption")
                if caption.strip():
                    text = f"{text.strip()} [shares a photo: {caption.strip()}]".strip()
                speaker = t.get("speaker")
                if not isinstance(speaker, str) or not speaker.strip():
                    raise _bad(path.name, where, "speaker", "missing speaker")
                turns.append(ParsedTurn("user", speaker.strip(), text.strip(), i))
            sessions.append(Session(path.name, f"{name}-session-{no}", date, tuple(turns)))
            last = date if last is None or date > last else last
        asked = last + timedelta(days=1) if last is not None else None
        for q_no, qa in enumerate(sample.get("qa") or conv.get("qa") or []):
            if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
                raise _bad(path.name, f"conversation {name} qa {q_no}", "question", "missing question")
            category = str(qa.get("category", ""))
            questions.append(
                Question(
                    question_id=f"{name}-q{q_no}",
                    question=qa["question"],
                    answer=qa.get("answer", qa.get("adversarial_answer")),
                    question_date=asked,
                    category=category,
                    evidence=tuple(ev for raw in qa.get("evidence") or [] for ev in _dia_ids(name, raw)),
                    abstention=category == "5",
                )
            )
    return sessions, questions


def _dia_ids(conversation: str, raw: Any) -> Iterable[tuple[str, int]]:
    """``D3:5`` as ``(conv-session-3, 4)``; the release's few malformed ids (``D8:6; D9:17``) split."""
    for m in re.finditer(r"D(\d+):(\d+)", str(raw)):
        yield f"{conversation}-session-{int(m.group(1))}", int(m.group(2)) - 1


def parse_longmemeval(path: Path) -> tuple[list[Session], list[Question]]:
    """The sessions and questions of a LongMemEval file (see the module docstring)."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise _bad(path.name, "file", "questions", "a LongMemEval file is a JSON list of questions")
    by_id: dict[str, Session] = {}
    questions: list[Question] = []
    for n, q in enumerate(data):
        if not isinstance(q, dict):
            raise _bad(path.name, f"question {n}", "question", "not a JSON object")
        qid = q.get("question_id")
        item = f"question {qid if isinstance(qid, str) else n}"
        for name in ("question_id", "question", "haystack_session_ids", "haystack_dates", "haystack_sessions"):
            if name not in q:
                raise _bad(path.name, item, name, "missing")
        ids, dates, bodies = q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"]
        if not (isinstance(ids, list) and isinstance(dates, list) and isinstance(bodies, list)) or not len(ids) == len(
            dates
        ) == len(bodies):
            raise _bad(
                path.name,
                item,
                "haystack_sessions",
                "haystack_session_ids, haystack_dates and haystack_sessions must be lists of one length",
            )
        evidence: list[tuple[str, int]] = []
        for sid, raw_date, body in zip(ids, dates, bodies, strict=True):
            where = f"{item} session {sid}"
            date = parse_date(raw_date, path.name, where, "haystack_dates")
            if not isinstance(body, list):
                raise _bad(path.name, where, "haystack_sessions", "not a list of turns")
            turns = []
            for i, t in enumerate(body):
                if not isinstance(t, dict):
                    raise _bad(path.name, f"{where} turn {i}", "turn", "not a JSON object")
                role = t.get("role")
                if role not in ("user", "assistant", "system"):
                    raise _bad(path.name, f"{where} turn {i}", "role", f"must be user or assistant (got {role!r})")
                text = t.get("content")
                if not isinstance(text, str) or not text.strip():
                    raise _bad(path.name, f"{where} turn {i}", "content", "a turn with no text and no caption")
                turns.append(ParsedTurn(role, role, text.strip(), i))
                if t.get("has_answer"):
                    evidence.append((str(sid), i))
            if not turns:
                continue
            known = by_id.get(str(sid))
            if known is None or date < known.date:
                by_id[str(sid)] = Session(path.name, str(sid), date, tuple(turns))
        asked = parse_date(q["question_date"], path.name, item, "question_date") if q.get("question_date") else None
        questions.append(
            Question(
                question_id=str(qid),
                question=str(q["question"]),
                answer=q.get("answer"),
                question_date=asked,
                category=str(q.get("question_type", "")),
                evidence=tuple(evidence),
                answer_session_ids=tuple(str(s) for s in q.get("answer_session_ids") or ()),
                abstention=str(qid).endswith("_abs"),
            )
        )
    return list(by_id.values()), questions


PARSERS = {"locomo": parse_locomo, "longmemeval": parse_longmemeval}


def _paths(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    items = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            out.extend(sorted(p.glob("*.json")))
        elif p.exists():
            out.append(p)
        else:
            raise ValidationError(f"{p}: no such file or directory", field="path")
    if not out:
        raise ValidationError(f"{path}: no JSON files to load", field="path")
    return out


# --------------------------------------------------------------------------- loading


def load(
    store: MemoryStore,
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    format: str,
    by: Principal,
    scope: Scope | None = None,
    ttl: timedelta | None = None,
    progress: bool | None = None,
    source: str | None = None,
) -> LoadReport:
    """Parse every file first (bad input writes nothing), then write session by session in date order.

    *ttl* applies to each turn from its session's date (None: benchmark turns do not
    expire). *progress*: None shows a load of many turns (`progress.Progress`: a bar on stderr
    when it is a terminal, log lines otherwise), False nothing, True any load.
    """
    if format not in PARSERS:
        raise ValidationError(f"format must be one of {', '.join(FORMATS)} (got {format!r})", field="format")
    started = time.perf_counter()
    files = _paths(path)
    sessions: list[Session] = []
    questions: list[Question] = []
    for f in files:
        s, q = PARSERS[format](f)
        sessions.extend(s)
        questions.extend(q)
    sessions.sort(key=lambda s: s.date)  # stable: file order, then session order, breaks ties
    origin = source or f"{format}-loader"
    inserted = duplicates = late = turns = 0
    size = sum(len(s.turns) for s in sessions)
    with Progress(f"loading {format}", total=len(sessions), unit="sessions", size=size, enabled=progress) as bar:
        for session in sessions:
            records = [
                Turn(
                    session.session_id,
                    t.role,
                    t.text,
                    session.date,
                    speaker=t.speaker,
                    position=t.position,
                    ttl=ttl,
                    source=origin,
                )
                for t in session.turns
            ]
            with store.clock.pinned(session.date):
                result = store.write_many(records, by=by, scope=scope, reason=f"{format} load of {session.file}")
            new = len(result) - result.count("duplicate") - result.count("forgotten")
            inserted += new
            duplicates += result.count("duplicate")
            turns += len(records)
            if new and result.committed_at is not None and result.committed_at > session.date:
                late += 1
            bar.advance()
    return LoadReport(
        format,
        tuple(str(f) for f in files),
        len(sessions),
        turns,
        inserted,
        duplicates,
        late,
        round(time.perf_counter() - started, 3),
        tuple(questions),
    )
