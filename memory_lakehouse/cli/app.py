"""`memlake`: the command line, a thin layer over the library.

Each command opens the store and makes one library call. Reads print a table, or JSON
with ``--json``. Library errors become one line on stderr and exit status 2.

Who acts comes from ``--as/--scope/--role``, else the environment (``MEMLAKE_AS``,
``MEMLAKE_SCOPE``, ``MEMLAKE_ROLE``), else a profile file (``--profile`` or
``MEMLAKE_PROFILE``: JSON ``{"as": ..., "scope": ..., "role": ...}``). A command that
acts as someone refuses to run without a scope: it never guesses an org.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from .. import errors
from ..arrow_pool import prefer_jemalloc
from ..progress import Progress
from ..records import from_dict, to_dict
from ..scope import ROLES, Principal, Scope
from ..time import require_aware

if TYPE_CHECKING:
    from ..store import MemoryStore


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Scope):
        return value.path
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def _emit(args: argparse.Namespace, payload: Any, lines: Callable[[], Sequence[str]]) -> None:
    if args.json:
        print(json.dumps(payload, default=_json_default, indent=2, ensure_ascii=False))
    else:
        for line in lines():
            print(line)


#: Input lines parsed between two moves of the reading bar.
READ_CHUNK = 1024
#: A file of this many records takes a second or more to read: it shows a bar (`progress.Progress`).
PROGRESS_RECORDS = 5000


def _open(args: argparse.Namespace, *, create: bool = False) -> MemoryStore:
    """The command's store; `main` closes it (saving index rows caught up on the way)."""
    from ..store import open as open_store

    store = args.opened = open_store(args.store, ledger_uri=args.ledger, create=create)
    return store


#: Where each part of the principal comes from when its flag is not given.
ENV = {"principal": "MEMLAKE_AS", "scope": "MEMLAKE_SCOPE", "role": "MEMLAKE_ROLE"}
PROFILE_KEYS = {"principal": "as", "scope": "scope", "role": "role"}
DEFAULT_ID, DEFAULT_ROLE = "cli", "member"


def _profile(args: argparse.Namespace) -> dict[str, Any]:
    path = getattr(args, "profile", None) or os.environ.get("MEMLAKE_PROFILE")
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise errors.ValidationError(f"profile {path}: {exc}", field="profile") from exc
    if not isinstance(data, dict):
        raise errors.ValidationError(f"profile {path} must be a JSON object", field="profile")
    return data


def _principal(args: argparse.Namespace) -> Principal:
    """Flags, then environment, then profile; no scope anywhere is an error, never org ``default``."""
    profile = _profile(args)

    def pick(name: str) -> str | None:
        value = getattr(args, name, None) or os.environ.get(ENV[name]) or profile.get(PROFILE_KEYS[name])
        return str(value) if value else None

    scope = pick("scope")
    if scope is None:
        raise errors.ValidationError(
            "no scope: pass --scope org[/division/team/actor], set MEMLAKE_SCOPE, "
            "or give a profile (--profile, MEMLAKE_PROFILE)",
            field="scope",
        )
    role = pick("role") or DEFAULT_ROLE
    if role not in ROLES:
        raise errors.ValidationError(f"role must be one of {', '.join(ROLES)} (got {role!r})", field="role")
    return Principal(pick("principal") or DEFAULT_ID, Scope.parse(scope), role=role)  # type: ignore[arg-type]  # role is one of ROLES, checked above


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _time(value: str | None, name: str) -> datetime | None:
    """A time option: an ISO datetime with a zone, or a date alone (midnight UTC)."""
    if not value:
        return None
    flag = "--" + name.replace("_", "-")
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise errors.ValidationError(
            f"{flag} {value!r} is not a date or time: write 2026-12-01 (midnight UTC) or 2026-12-01T09:30:00Z",
            field=name,
        ) from None
    if _DATE.fullmatch(text):
        return parsed.replace(tzinfo=UTC)
    if parsed.tzinfo is None:
        raise errors.ValidationError(
            f"{flag} {value} has no time zone: write {value}Z for UTC, or add an offset such as +02:00", field=name
        )
    return require_aware(parsed, name)


def _input_name(path: str) -> str:
    return "stdin" if path == "-" else path


def _input_lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line of a file (``-``: stdin), read as UTF-8."""
    if path == "-":
        yield from _decoded(getattr(sys.stdin, "buffer", sys.stdin), "stdin")
        return
    try:
        stream: IO[bytes] = open(path, "rb")
    except OSError as exc:
        raise errors.ValidationError(f"--file {path}: {(exc.strerror or str(exc)).lower()}", field="file") from None
    with stream:
        yield from _decoded(stream, path)


def _decoded(stream: Iterable[bytes | str], where: str) -> Iterator[tuple[int, str]]:
    for n, raw in enumerate(stream, 1):
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise errors.ValidationError(
                    f"{where} line {n}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})",
                    field="record",
                ) from None
        else:
            line = raw
        if n == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark is not part of the first record
        if line.strip():
            yield n, line


def _json_line(line: str, n: int, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise errors.ValidationError(
            f"{where} line {n}: not JSON ({exc.msg} at column {exc.colno})", field="record"
        ) from None


def error_line(exc: BaseException) -> str | None:
    """The one line the CLI prints for an error it expects, or None for a bug (a traceback).

    The library raises its own typed errors (`errors`); the rest are the command line's
    own input: a file that cannot be read.
    """
    if isinstance(exc, errors.LakehouseError):
        text = f"{type(exc).__name__}: {exc}"
    elif isinstance(exc, OSError):
        text = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    else:
        return None
    return "memlake: " + " ".join(text.split("\n"))


# ---------------------------------------------------------------- commands


def cmd_init(args: argparse.Namespace) -> None:
    store = _open(args, create=True)
    _emit(
        args,
        {"store": store.root, "tables": sorted(store.lake.views)},
        lambda: [f"initialised memory store at {store.root}"],
    )


def cmd_write(args: argparse.Namespace) -> None:
    where = _input_name(args.file)
    records, lines = [], []
    numbered = list(_input_lines(args.file))
    with Progress(f"reading {where}", total=len(numbered), unit="records", min_items=PROGRESS_RECORDS) as bar:
        for n, line in numbered:
            try:
                records.append(from_dict(_json_line(line, n, where)))
            except errors.ValidationError as exc:
                if exc.detail.startswith(f"{where} line "):
                    raise
                raise errors.ValidationError(f"{where} line {n}: {exc.detail}", field=exc.field) from None
            lines.append(n)
            if len(lines) % READ_CHUNK == 0:
                bar.advance(READ_CHUNK)
        bar.advance(len(lines) % READ_CHUNK)
    del numbered
    store = _open(args)
    try:
        result = store.write_many(records, by=_principal(args), reason=args.reason)
    except errors.ValidationError as exc:  # the batch's bad record, named by its input line
        if exc.index is None:
            raise
        raise errors.ValidationError(f"{where} line {lines[exc.index]}: {exc.detail}", field=exc.field) from None
    counts = result.counts
    dropped = (
        [
            f"{counts['forgotten']} record(s) not written: their subject was forgotten at or after they "
            "were valid (erased history stays erased); lines " + ", ".join(str(lines[i]) for i in result.dropped)
        ]
        if counts["forgotten"]
        else []
    )
    _emit(
        args,
        {
            "txn_id": result.txn_id,
            "counts": counts,
            "results": [
                {
                    "record_id": r.record_id or None,
                    "action": r.action,
                    "kind": r.kind,
                    "supersedes": r.supersedes,
                    "redacted": list(r.redacted),
                }
                for r in result
            ],
        },
        lambda: (
            ([f"{r.action:<10} {r.kind:<10} {r.record_id or '-'}" for r in result] if args.verbose else [])
            + [
                f"{len(result)} record(s): "
                + ", ".join(f"{v} {k}" for k, v in counts.items() if v or k != "forgotten")
                + f" (txn {result.txn_id})"
            ]
            + dropped
        ),
    )


def _basis_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "as_of": _time(args.as_of, "as_of"),
        "known_at": _time(args.known_at, "known_at"),
        "valid_at": _time(args.valid_at, "valid_at"),
    }


def cmd_recall(args: argparse.Namespace) -> None:
    store = _open(args)
    hits = store.recall(
        args.query, by=_principal(args), subject=args.subject, k=args.k, kinds=args.kind or None, **_basis_kwargs(args)
    )
    _emit(
        args,
        [{"score": h.score, "why": list(h.why), "record": to_dict(h.record)} for h in hits],
        lambda: (
            [f"{h.score:7.3f}  {h.kind:<10} {h.text}   [{'; '.join(h.why)}]" for h in hits] or ["(nothing visible)"]
        ),
    )


def cmd_fact(args: argparse.Namespace) -> None:
    store = _open(args)
    fact = store.get_fact(args.subject, args.attribute, by=_principal(args), kind=args.kind, **_basis_kwargs(args))
    _emit(
        args,
        to_dict(fact) if fact else None,
        lambda: (
            [
                f"{args.subject}.{args.attribute} = {fact.value!r}  (valid from {fact.valid_from.isoformat()}, "
                f"known since {fact.known_since.isoformat() if fact.known_since else None}, source {fact.source})"
            ]
            if fact
            else [f"{args.subject}.{args.attribute}: nothing visible at this basis"]
        ),
    )


def cmd_policy(args: argparse.Namespace) -> None:
    try:
        facts = json.loads(args.facts)
    except json.JSONDecodeError:
        facts = None
    if not isinstance(facts, dict):
        raise errors.ValidationError(
            f'--facts {args.facts!r} is not a JSON object: write it as \'{{"market": "US"}}\'', field="facts"
        )
    store = _open(args)
    at = _time(args.at, "at")
    if at is None:  # --at is required: argparse has said so already
        raise errors.ValidationError("--at is required", field="at")
    decision = store.resolve_policy(facts, at=at, by=_principal(args), known_at=_time(args.known_at, "known_at"))
    _emit(args, decision.to_dict(), lambda: [decision.explanation])


def cmd_audit(args: argparse.Namespace) -> None:
    store = _open(args)
    events = store.audit(
        by=_principal(args),
        subject=args.subject,
        record_id=args.record_id,
        since=_time(args.since, "since"),
        until=_time(args.until, "until"),
        actor=args.actor,
    )
    _emit(
        args,
        [e.__dict__ for e in events],
        lambda: (
            [
                f"{e.committed_at.isoformat()}  {e.table}@{e.version}  {e.operation:<8} by {e.actor}"
                f"  {len(e.record_ids)} record(s)" + (f"  reason: {e.reason}" if e.reason else "")
                for e in events
            ]
            or ["(no events)"]
        ),
    )


def cmd_forget(args: argparse.Namespace) -> None:
    store = _open(args)
    report = store.forget(args.subject, by=_principal(args), reason=args.reason)
    _emit(
        args,
        report.__dict__,
        lambda: [
            f"forgot {args.subject}: generation {report.generation}, {len(report.record_ids)} record(s) hidden "
            "at every basis; run `memlake purge --yes` to erase the bytes"
        ],
    )


def cmd_purge(args: argparse.Namespace) -> None:
    store = _open(args)
    report = store.purge(by=_principal(args), dry_run=not args.yes)
    _emit(args, report.to_dict(), lambda: report.summary().splitlines())


def cmd_replay(args: argparse.Namespace) -> None:
    store = _open(args)
    principal = _principal(args)
    decisions = []
    where = _input_name(args.file)
    for n, line in _input_lines(args.file):
        row = _json_line(line, n, where)
        missing = [k for k in ("decision_id", "decided_at") if not isinstance(row, dict) or k not in row]
        if missing:
            raise errors.ValidationError(
                f"{where} line {n}: a decision needs {' and '.join(missing)}", field=missing[0]
            )
        try:
            decided_at = require_aware(row["decided_at"], "decided_at")
        except errors.ValidationError as exc:
            raise errors.ValidationError(f"{where} line {n}: {exc.detail}", field=exc.field) from None
        decisions.append((row["decision_id"], principal, row.get("query", ""), row.get("subject"), decided_at))
    rep = store.replay(decisions, naive=args.naive)
    per_decision = rep.per_decision().to_pylist()
    _emit(
        args,
        {
            "decisions": rep.decisions,
            "leakage_rate": rep.leakage_rate,
            "freshness_lag_seconds": rep.freshness_lag_seconds,
            "visible_rows": rep.visible.num_rows,
            "per_decision": per_decision,
        },
        lambda: [
            f"{rep.decisions} decision(s), {rep.visible.num_rows} visible row(s), leakage rate {rep.leakage_rate:.1%}"
        ],
    )


def cmd_bench(args: argparse.Namespace) -> None:
    from ..bench import main as bench_main

    bench_main(
        ["--records", str(args.records), "--embedder", args.embedder]
        + (["--quick"] if args.quick else [])
        + (["--recall"] if args.recall else [])
        + (["--store", args.store] if args.store else [])
        + ["--workload", args.workload]
        + ([] if args.read_cache_mb is None else ["--read-cache-mb", str(args.read_cache_mb)])
    )


def cmd_eval(args: argparse.Namespace) -> None:
    """Run the repository's eval suite, `evals.suite` (the library itself never imports it)."""
    try:
        from evals.suite import main as suite_main
    except ModuleNotFoundError as exc:
        raise errors.StoreError("the eval suite was not found: run from a checkout that has evals/") from exc
    code = suite_main(list(args.rest))
    if code:
        raise SystemExit(code)


def cmd_demo(args: argparse.Namespace) -> None:
    from ..demo import run_demo

    run_demo(args.store)


# ---------------------------------------------------------------- parser


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default in (None, False, argparse.SUPPRESS) or "%(default)" in (action.help or ""):
            return action.help or ""
        return super()._get_help_string(action) or ""


class Parser(argparse.ArgumentParser):
    """An argument parser whose help shows defaults; subcommands get the same class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def _common(p: argparse.ArgumentParser, *, principal: bool = True, basis: bool = False) -> None:
    p.add_argument("--store", default="data/store", help="store path or URI")
    p.add_argument("--ledger", default=None, help="deletion ledger URI, if kept apart from the store")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--quiet", action="store_true", help="no progress on stderr (bars on a terminal, log lines otherwise)"
    )
    if principal:
        p.add_argument(
            "--as",
            dest="principal",
            default=None,
            help=f"principal id acting (else ${ENV['principal']}, the profile, or '{DEFAULT_ID}')",
        )
        p.add_argument(
            "--scope",
            default=None,
            help=f"principal scope org/division/team/actor (else ${ENV['scope']} or the profile; required)",
        )
        p.add_argument(
            "--role",
            default=None,
            choices=ROLES,
            help=f"principal role (else ${ENV['role']}, the profile, or '{DEFAULT_ROLE}')",
        )
        p.add_argument("--profile", default=None, help="JSON profile with as/scope/role (else $MEMLAKE_PROFILE)")
    if basis:
        p.add_argument("--as-of", help="ISO datetime with a zone, or a date (midnight UTC): sets both clocks")
        p.add_argument("--known-at", help="ISO datetime or date: system time (what the store had recorded)")
        p.add_argument("--valid-at", help="ISO datetime or date: world time (what was true)")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = Parser(prog="memlake", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"memlake {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("init", help="create a store")
    _common(p, principal=False)
    p.set_defaults(fn=cmd_init)
    p = sub.add_parser("write", help="write JSON-lines records (stdin or --file)")
    _common(p)
    p.add_argument(
        "--file", default="-", help="JSON-lines file, one record a line ('-': stdin); fields per kind: `memlake schema`"
    )
    p.add_argument("--reason", help="why (kept in the commit log)")
    p.add_argument("--verbose", action="store_true", help="one line per record, not only the summary")
    p.set_defaults(fn=cmd_write)
    p = sub.add_parser("recall", help="recall memories for a query")
    _common(p, basis=True)
    p.add_argument("query", help="what to recall, in words")
    p.add_argument("--subject", help="only memories about this subject (e.g. user:42)")
    p.add_argument("-k", type=int, default=8, help="how many hits")
    p.add_argument("--kind", action="append", help="restrict to a kind (repeatable)")
    p.set_defaults(fn=cmd_recall)
    p = sub.add_parser("fact", help="read one slot: subject + attribute")
    _common(p, basis=True)
    p.add_argument("subject", help="the subject, e.g. user:42")
    p.add_argument("attribute", help="the attribute, e.g. plan")
    p.add_argument("--kind", default="fact", choices=("fact", "preference"), help="the slot's kind")
    p.set_defaults(fn=cmd_fact)
    p = sub.add_parser("policy", help="policy decisions")
    psub = p.add_subparsers(dest="policy_command", required=True)
    r = psub.add_parser("resolve", help="which policy governs a case")
    _common(r)
    r.add_argument("--facts", required=True, help='JSON object, e.g. {"market": "US"}')
    r.add_argument("--at", required=True, help="ISO datetime of the case (e.g. order placed)")
    r.add_argument("--known-at", help="ISO datetime: what the store knew then")
    r.set_defaults(fn=cmd_policy)
    p = sub.add_parser("audit", help="who did what, when, why (steward)")
    _common(p)
    p.add_argument("--subject", help="events touching this subject")
    p.add_argument("--record-id", help="events touching this record (and rows acting on it)")
    p.add_argument("--since", help="ISO datetime: events at or after (system time)")
    p.add_argument("--until", help="ISO datetime: events before (system time)")
    p.add_argument("--actor", help="only this actor's events")
    p.set_defaults(fn=cmd_audit)
    p = sub.add_parser("forget", help="tombstone a subject: hidden at once, everywhere (steward)")
    _common(p)
    p.add_argument("subject", help="the subject to forget, e.g. customer-728")
    p.add_argument("--reason", required=True, help="why (kept in the deletion ledger)")
    p.set_defaults(fn=cmd_forget)
    p = sub.add_parser("purge", help="erase forgotten and expired bytes (dry run unless --yes)")
    _common(p)
    p.add_argument("--yes", action="store_true", help="really erase")
    p.set_defaults(fn=cmd_purge)
    p = sub.add_parser("replay", help="replay decisions (JSON lines: decision_id, decided_at, subject, query)")
    _common(p)
    p.add_argument("--file", default="-", help="JSON-lines decisions ('-': stdin)")
    p.add_argument("--naive", action="store_true", help="run the time-blind query instead, for comparison")
    p.set_defaults(fn=cmd_replay)
    p = sub.add_parser("bench", help="benchmark: prints JSON figures")
    p.add_argument("--records", type=int, default=100_000, help="store size")
    p.add_argument("--quick", action="store_true", help="fewer queries, for a smoke run")
    p.add_argument(
        "--quiet", action="store_true", help="no progress on stderr (bars on a terminal, log lines otherwise)"
    )
    p.add_argument("--recall", action="store_true", help="recall figures: index build, latency vs floor, RSS")
    p.add_argument(
        "--embedder",
        choices=("default", "hashing"),
        default="default",
        help="the bundled model, or a hashing embedder (no model load)",
    )
    p.add_argument("--store", help="where to build the bench store, kept (default: a temp dir, removed after the run)")
    p.add_argument(
        "--workload",
        choices=("store", "tenants"),
        default="store",
        help="tenants: many orgs, teams and actors, each read by a new actor, beside a SQLite floor",
    )
    p.add_argument(
        "--read-cache-mb",
        type=int,
        default=None,
        help="with --workload tenants: the store's read_cache_bytes in MB (default 512)",
    )
    p.set_defaults(fn=cmd_bench)
    # every argument (options included) goes to the suite's own parser: `memlake eval --help` is its help
    p = sub.add_parser(
        "eval",
        help="behavioural evals, ours vs a naive memory: NAME... | all, --quick, --out DIR",
        add_help=False,
        prefix_chars="\0",
    )
    p.add_argument("rest", nargs="*", help="the suites and their options (`memlake eval --help`)")
    p.set_defaults(fn=cmd_eval)
    p = sub.add_parser("demo", help="a short story on a fresh store")
    p.add_argument("--store", default="data/store", help="where to build the demo store (emptied first)")
    p.set_defaults(fn=cmd_demo)
    for name in COMMAND_GROUPS:  # the other command groups, one module each
        importlib.import_module(f"{__package__}.{name}").register(sub)
    return parser


#: Modules of this package that add commands: each has ``register(sub)``, called with the subparsers.
COMMAND_GROUPS: tuple[str, ...] = ("conversation", "maintenance", "export", "governed", "reads", "serve")


class _StderrLog(logging.Handler):
    """The library's log records as ``memlake: …`` lines on the current stderr (long work says
    so where no progress bar is drawn: stderr is not a terminal)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print("memlake: " + self.format(record), file=sys.stderr, flush=True)
        except Exception:  # a closed stderr must not turn into a second error
            self.handleError(record)


@contextlib.contextmanager
def _reporting(quiet: bool) -> Iterator[None]:
    """While a command runs: progress bars unless *quiet*, and the library's INFO records
    (long work) on stderr unless *quiet* (warnings always)."""
    logger = logging.getLogger("memory_lakehouse")
    handler = _StderrLog(logging.WARNING if quiet else logging.INFO)
    saved = logger.level
    logger.addHandler(handler)
    logger.setLevel(min(handler.level, logger.getEffectiveLevel()))
    try:
        with Progress.settings(bars=not quiet):
            yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    prefer_jemalloc()  # the command is an application: it picks Arrow's pool for its process (`arrow_pool`)
    try:
        # `eval` hands its options to the suite's own parser: its --quiet silences our log lines too
        quiet = bool(getattr(args, "quiet", False)) or "--quiet" in getattr(args, "rest", ())
        with _reporting(quiet):
            try:
                args.fn(args)
            finally:
                if getattr(args, "opened", None) is not None:
                    args.opened.close()  # may wait for a background index build: still reported
    except Exception as exc:
        line = error_line(exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
