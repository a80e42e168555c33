"""Article 002: the 02:47 page — on-call memory is evidence, scoped, superseded and expiring.

Checkout's on-call team records what it tried over two months. Six weeks before the
page, the on-call bot tries to file a chat-thread suggestion ("raise the pool size") as
a fact: with no evidence it is refused, and it can only propose it as a draft. At
02:47 on March 10 the bot asks what was tried on checkout/prod v3.1: five rows, newest
first, every one with a link, none from staging, the rewritten legacy service, a
sibling team, the old pooler's version range, an inconclusive or a draft. After the page
a human promotes the bot's draft, a late row arrives, a postmortem supersedes a
"fix" that was a coincidence, and replaying 02:47 still sees exactly what the bot saw.
Failed episodes stop counting after 90 days unless a human records them again. Tight
version ranges keep the contradiction rate at zero; a version-blind query does not.
"""

from _scenario import UTC, Checks, SimClock, attempt, datetime, parse_store, timedelta

import memory_lakehouse as ml

path = parse_store(__doc__.splitlines()[0])
clock = SimClock(datetime(2026, 1, 5, 10, tzinfo=UTC))
store = ml.open(path, clock=clock)
check = Checks("scenario 002 (on-call episodes)")

TEAM = ml.Scope("acme", "eng", "checkout-sre")
dana = ml.Principal("dana", TEAM, role="curator")  # closes incidents, writes the team's memory
bot = ml.Principal("oncall-bot", ml.Scope("acme", "eng", "checkout-sre", "oncall-bot"), role="agent")
priya = ml.Principal("priya", ml.Scope("acme", "eng", "payments-sre"), role="curator")  # a sibling team
dpo = ml.Principal("dpo", ml.Scope("acme"), role="steward")
SUBJECT = "service:checkout"  # an episode's subject when it names none
P99 = "p99 on /checkout above 4s"
ROLLBACK = "rollback to the previous release"


def at(month: int, day: int, hour: int = 10, minute: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def episode(
    symptom: str,
    action: str,
    outcome: str,
    evidence,
    *,
    service: str = "checkout",
    env: str = "prod",
    observed_at: datetime | None = None,
    **kw,
) -> ml.Episode:
    return ml.Episode(
        service,
        env,
        symptom,
        action,
        outcome,
        observed_at or clock.now,
        evidence=evidence,
        source="incident-review",
        **kw,
    )


def record(when: datetime, *args, by: ml.Principal = dana, **kw) -> ml.WriteResult:
    """Set the clock to *when* and write one episode observed then, as *by*."""
    clock.set(when)
    return store.write(episode(*args, **kw), by=by)


def ask(version: str | None, *, by: ml.Principal = bot, k: int = 5, **kw) -> list:
    return store.episodes(service="checkout", env="prod", by=by, version=version, k=k, **kw)


def ids(eps) -> list[str]:
    return [e.record_id for e in eps]


def show(eps) -> None:
    for e in eps:
        span = f"{e.version_from or '…'}..{e.version_to or '…'}"
        print(f"     {e.observed_at:%b %d %H:%M}  {e.outcome:<7} {e.action:<48} [{span}]  {e.evidence}")


def in_range(version: str, e) -> bool:  # the scenario's own reading of "v3.1", for checking results
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.lstrip("v").split("."))

    return (e.version_from is None or key(e.version_from) <= key(version)) and (
        e.version_to is None or key(version) <= key(e.version_to)
    )


def disagreements(eps) -> bool:
    """Two retrieved episodes on the same service and action with different outcomes."""
    seen: dict[tuple, set] = {}
    for e in eps:
        seen.setdefault((e.service, e.action), set()).add(e.outcome)
    return any(len(outcomes) > 1 for outcomes in seen.values())


def audit_count() -> int:
    return len(store.audit(subject=SUBJECT, by=dpo))


print(f"store: {path}")

# ----------------------------------------------------------------------------- January: the old pooler (v2.x)
print("\n== January, checkout v2.3 on the old pooler")
pool_v2 = record(at(1, 5), P99, "pool 20 -> 40", "fixed", "https://incidents.example/INC-101", version_from="v2.0")
rb_v23 = record(
    at(1, 12),
    "error rate above 2% after deploy",
    ROLLBACK,
    "failed",
    "https://incidents.example/INC-107",
    version_from="v2.3",
    version_to="v2.3",
)
staging = record(
    at(1, 19),
    P99,
    "restart checkout pods",
    "fixed",
    "https://incidents.example/INC-S12",
    env="staging",
    version_from="v3.0",
)
legacy = record(
    at(1, 22), P99, "add index on carts.user_id", "fixed", "https://incidents.example/INC-L9", service="checkout-legacy"
)
print("   dana records: pool 20 -> 40 fixed p99 (v2.0..), a failed rollback on v2.3, a staging fix, and a fix")
print("   on checkout-legacy (the service since rewritten) with the very same symptom text")
stored = store.episodes(service="checkout", env="prod", by=dana, version="v2.3", k=50)
rb_row = next(e for e in stored if e.record_id == rb_v23.record_id)
check(
    "a failed episode gets a 90-day expiry by default",
    rb_row.expires_at == at(1, 12) + timedelta(days=90),
    f"expires {rb_row.expires_at:%b %d}",
)
pool_row = next(e for e in stored if e.record_id == pool_v2.record_id)
check("a fixed episode has no default expiry", pool_row.expires_at is None)

# ----------------------------------------------------------------------------- Jan 27: the thread
print("\n== Jan 27: someone suggests raising the pool size in a chat thread; the bot wants to remember it")
clock.set(at(1, 27, 15, 30))
before = audit_count()
rumour = episode(P99, "increase the pool size", "failed", None)  # "we tried it, it didn't help" — no link
err = attempt("the bot files the suggestion as a fact", lambda: store.write(rumour, by=bot, scope=TEAM))
check("an agent cannot write memory, only propose it", isinstance(err, ml.PermissionDenied))
err = attempt("the bot proposes it without evidence", lambda: store.propose(rumour, by=bot, scope=TEAM))
check(
    "an episode without evidence is refused, naming the field",
    isinstance(err, ml.ValidationError) and err.field == "evidence",
)
err = attempt("dana writes an episode without evidence", lambda: store.write(rumour, by=dana))
check("even a human cannot write one without evidence", isinstance(err, ml.ValidationError) and err.field == "evidence")
err = attempt("... or with blank evidence", lambda: store.write(rumour.replace(evidence="  "), by=dana))
check("blank evidence is no evidence", isinstance(err, ml.ValidationError) and err.field == "evidence")
good = episode(P99, "raise pool 20 -> 30", "fixed", "https://incidents.example/INC-120", version_from="v2.0")
err = attempt("a batch with one evidence-less episode", lambda: store.write_many([good, rumour], by=dana))
check(
    "a batch with one evidence-less episode is refused whole",
    isinstance(err, ml.ValidationError) and err.field == "evidence",
)
check("and none of those refusals wrote anything", audit_count() == before, f"{audit_count()} events, was {before}")
err = attempt(
    "an outcome outside fixed|failed|inconclusive", lambda: store.write(good.replace(outcome="worked"), by=dana)
)
check(
    "the outcome is one of fixed, failed, inconclusive", isinstance(err, ml.ValidationError) and err.field == "outcome"
)
err = attempt("a naive observed_at", lambda: store.write(good.replace(observed_at=datetime(2026, 1, 27)), by=dana))
check("observed_at must be timezone-aware (never assumed UTC)", isinstance(err, ml.ValidationError))
thread = "https://chat.example/checkout-oncall/p1769527800"
draft = store.propose(episode(P99, "increase the pool size", "inconclusive", thread), by=bot, scope=TEAM)
print(f"   the bot proposes it as an inconclusive draft with the thread's permalink: {draft.record_id}")
check(
    "the bot's draft is recorded, as a proposal",
    draft.action == "inserted" and [e.operation for e in store.audit(record_id=draft.record_id, by=dpo)] == ["propose"],
)

# ----------------------------------------------------------------------------- February: the new pooler (v3.x)
print("\n== Feb 9: v3.0 swaps the pooler; dana closes the pool fix's version range")
clock.set(at(2, 9))
closed = store.write(
    episode(
        P99,
        "pool 20 -> 40",
        "fixed",
        "https://incidents.example/INC-101",
        observed_at=at(1, 5),
        version_from="v2.0",
        version_to="v2.3",
        supersedes=pool_v2.record_id,
    ),
    by=dana,
)
check(
    "closing the range supersedes the open-ended row, with a pointer",
    closed.action == "superseded" and closed.supersedes == pool_v2.record_id,
    f"action {closed.action!r}, supersedes {closed.supersedes}",
)
fix_conn = record(
    at(2, 10),
    P99 + ", db connections maxed",
    "stop opening a connection per request",
    "fixed",
    "https://git.example/checkout/pull/2291",
    version_from="v3.0",
)
rb_v30 = record(
    at(2, 12),
    "error rate above 2% after deploy",
    ROLLBACK,
    "fixed",
    "https://incidents.example/INC-190",
    version_from="v3.0",
    version_to="v3.0",
)
timeout = record(
    at(2, 14),
    P99,
    "raise statement_timeout 2s -> 5s",
    "failed",
    "https://incidents.example/INC-188",
    version_from="v3.0",
)
replicas = record(
    at(2, 18),
    "5xx spike on /checkout/pay",
    "scale checkout 8 -> 12 replicas",
    "fixed",
    "https://incidents.example/INC-201",
    version_from="v3.0",
)
flush = record(
    at(2, 20),
    P99,
    "flush the redis session cache",
    "inconclusive",
    "https://incidents.example/INC-204",
    version_from="v3.0",
)
rb_v31 = record(
    at(2, 25),
    "error rate above 2% after deploy",
    ROLLBACK,
    "failed",
    "https://incidents.example/INC-215",
    version_from="v3.1",
    version_to="v3.1",
)
sibling = record(
    at(2, 27),
    P99,
    "disable payment retries from checkout",
    "fixed",
    "https://incidents.example/PAY-77",
    version_from="v3.0",
    by=priya,
)
restart = record(
    at(3, 1),
    "pgbouncer-ng CPU at 100%",
    "restart pgbouncer-ng",
    "fixed",
    "https://incidents.example/INC-230",
    version_from="v3.0",
)
prepared = record(
    at(3, 4),
    P99,
    "disable prepared statements in cart client",
    "failed",
    "https://incidents.example/INC-241",
    version_from="v3.0",
)
n_plus_1 = record(
    at(3, 7),
    "p99 on /checkout/cart above 3s",
    "fix N+1 query in cart summary",
    "fixed",
    "https://git.example/checkout/pull/2380",
    version_from="v3.1",
)
print("   dana records nine more episodes on v3.x (one inconclusive); payments-sre records one about checkout")

# ----------------------------------------------------------------------------- 02:47: the page
incident = at(3, 10, 2, 47)
clock.set(incident)
print(f"\n== {incident:%b %d %H:%M}: p99 on /checkout above 4s, prod, v3.1 — what was tried?")
seen = ask("v3.1")
show(seen)
eligible = [n_plus_1, prepared, restart, rb_v31, replicas, timeout, fix_conn]  # newest first
check(
    "five rows, not fifty: the newest five of seven eligible episodes",
    ids(seen) == [r.record_id for r in eligible[:5]],
    f"{len(seen)} rows",
)
check("newest first", [e.observed_at for e in seen] == sorted((e.observed_at for e in seen), reverse=True))
check("every row is checkout / prod", all((e.service, e.env) == ("checkout", "prod") for e in seen))
check("every row's version range contains v3.1", all(in_range("v3.1", e) for e in seen))
check(
    "every row carries evidence a human can open", all(e.evidence and e.evidence.startswith("https://") for e in seen)
)
everything = ask("v3.1", k=50)
got = set(ids(everything))
others = got - {pool_v2.record_id, closed.record_id}  # the pool fix's lineage has its own check below
check(
    "with room for fifty, the seven eligible rows and nothing else",
    others == {r.record_id for r in eligible},
    f"{len(others)} rows",
)
check("no staging episode", staging.record_id not in got)
check("no episode of the rewritten legacy service, however similar its symptom", legacy.record_id not in got)
check("no inconclusive episode", flush.record_id not in got and all(e.outcome != "inconclusive" for e in everything))
check("no row from the sibling team (payments-sre), even about checkout/prod", sibling.record_id not in got)
check("the sibling team does see its own row", sibling.record_id in ids(ask("v3.1", by=priya, k=50)))
check(
    "the old pooler's pool fix (closed at v2.3) does not come back on v3.1",
    not got & {pool_v2.record_id, closed.record_id},
    "; ".join(f"{e.action} [{e.version_from}..{e.version_to or '…'}]" for e in everything if "pool" in e.action),
)
check("the bot's draft is not served back to it as memory", draft.record_id not in got)
check(
    "nothing lets the bot say 'we already tried increasing the pool size; it didn't help'",
    not any("pool" in e.action and e.outcome != "fixed" for e in everything),
)
recalled = {
    h.record_id for h in store.recall("did we already try increasing the pool size?", by=bot, kinds=["episode"], k=20)
}
check("recall does not surface the draft either", draft.record_id not in recalled)
check("nor the sibling team's row", sibling.record_id not in recalled)
ranked = ask("v3.1", symptom="p99 on /checkout above 4s, db connections maxed")
print("   ranked by symptom (filter first, then rank):")
show(ranked)
check("ranking by symptom only reorders the filtered rows (five of them)", set(ids(ranked)) <= got and len(ranked) == 5)
check("... and puts the best match first (the connection-per-request fix)", ranked[0].record_id == fix_conn.record_id)
check(
    "the old pool fix still answers for v2.3, with its closed range",
    closed.record_id in ids(ask("v2.3")) and pool_v2.record_id not in ids(ask("v2.3")),
)

# ----------------------------------------------------------------------------- after the page
print("\n== 04:10: the bot proposes what fixed it; dana, who closed the incident, promotes it")
clock.set(at(3, 10, 4, 10))
hotfix = store.propose(
    episode(
        P99,
        "reuse one DB connection per request in cart price lookup",
        "inconclusive",
        "https://incidents.example/INC-311",
        observed_at=at(3, 10, 4),
    ),
    by=bot,
    scope=TEAM,
)
check(
    "the unpromoted draft is not memory, for the bot or for dana",
    hotfix.record_id not in ids(ask("v3.1", k=50)) and hotfix.record_id not in ids(ask("v3.1", by=dana, k=50)),
)
err = attempt("the bot approves its own draft", lambda: store.approve(hotfix.record_id, by=bot))
check("no human, no promotion: an agent cannot approve", isinstance(err, ml.PermissionDenied))
promoted = store.approve(hotfix.record_id, by=dana, outcome="fixed", version_from="v3.1", version_to="v3.1")
row = next((e for e in ask("v3.1") if e.record_id == promoted.record_id), None)
print(f"   promoted: {promoted.record_id} ({promoted.action} {promoted.supersedes})")
check(
    "the human sets the outcome and confirms the scope",
    row is not None
    and row.outcome == "fixed"
    and (row.version_from, row.version_to) == ("v3.1", "v3.1")
    and promoted.supersedes == hotfix.record_id,
)
check("the promoted episode does not claim v3.2", promoted.record_id not in ids(ask("v3.2", k=50)))

clock.set(at(3, 11, 9))
late = store.write(
    episode(
        P99,
        "raise pgbouncer-ng default_pool_size",
        "fixed",
        "https://incidents.example/INC-250",
        observed_at=at(3, 9, 22, 10),
        version_from="v3.1",
    ),
    by=dana,
)
print("   Mar 11: dana records an episode from Mar 9 22:10 that nobody wrote down at the time")
clock.set(at(3, 12, 11))
coincidence = store.write(
    episode(
        "5xx spike on /checkout/pay",
        "scale checkout 8 -> 12 replicas",
        "inconclusive",
        "https://postmortems.example/PM-201",
        observed_at=at(2, 18),
        version_from="v3.0",
        supersedes=replicas.record_id,
    ),
    by=dana,
)
print("   Mar 12: the postmortem finds the replica 'fix' was a coincidence and supersedes it (inconclusive)")
check(
    "the correction supersedes the 'fix' with a pointer",
    coincidence.action == "superseded" and coincidence.supersedes == replicas.record_id,
)
now = ask("v3.1")
show(now)
check(
    "the superseded 'fix' no longer comes back, nor its inconclusive correction",
    not set(ids(ask("v3.1", k=50))) & {replicas.record_id, coincidence.record_id},
)
check(
    "today's five: the promoted fix, the late row, then the newest of the rest",
    ids(now) == [promoted.record_id, late.record_id, n_plus_1.record_id, prepared.record_id, restart.record_id],
)

print(f"\n== Replaying {incident:%b %d %H:%M}")
replayed = ask("v3.1", as_of=incident)
check("as of the page, the bot's exact five rows come back", ids(replayed) == ids(seen))
check("... including the 'fix' superseded two days later", replicas.record_id in ids(replayed))
rep = store.replay([("INC-311", bot, P99, SUBJECT, incident)], kinds=["episode"])
visible = set(rep.visible.column("record_id").to_pylist())
check(
    "the replay sees nothing learned after 02:47 (late row, promotion, correction)",
    not visible & {late.record_id, promoted.record_id, coincidence.record_id},
)
check("leakage rate is 0", rep.leakage_rate == 0.0, f"{rep.leakage_rate:.0%}")
naive = store.replay([("INC-311", bot, P99, SUBJECT, incident)], kinds=["episode"], naive=True)
check("the naive time-blind query leaks (for comparison)", naive.leakage_rate == 1.0, f"{naive.leakage_rate:.0%}")

print("\n== Contradiction rate: 'the rollback failed last time' vs 'rollbacks don't work'")
versions = ["v2.3", "v3.0", "v3.1", "v3.2"]
scoped = {v: ask(v, k=50) for v in versions}
for v in versions:
    rb = [f"{e.outcome} ({e.evidence.rsplit('/', 1)[-1]})" for e in scoped[v] if e.action == ROLLBACK]
    print(f"   {v}: rollback -> {', '.join(rb) or 'nothing recorded'}")
check(
    "the v3.1 page hears 'the rollback failed last time' — on v3.1 only",
    [e.record_id for e in scoped["v3.1"] if e.action == ROLLBACK] == [rb_v31.record_id],
)
check(
    "v3.0 hears its rollback worked; v3.2 hears nothing about rollbacks",
    [e.record_id for e in scoped["v3.0"] if e.action == ROLLBACK] == [rb_v30.record_id]
    and not any(e.action == ROLLBACK for e in scoped["v3.2"]),
)
scoped_rate = sum(disagreements(eps) for eps in scoped.values()) / len(versions)
loose = [f"{e.outcome} ({e.evidence.rsplit('/', 1)[-1]})" for e in ask(None, k=50) if e.action == ROLLBACK]
print(f"   version-blind: rollback -> {', '.join(loose)}")
check(
    "with version ranges, the contradiction rate is 0 (no two rows disagree on one action)",
    scoped_rate == 0.0,
    f"{scoped_rate:.0%} of {len(versions)} queries",
)
check("a version-blind query returns rows that disagree (scope columns too loose)", disagreements(ask(None, k=50)))

# ----------------------------------------------------------------------------- decay by default
print("\n== May: negative memory expires")
clock.set(at(5, 14, 12))
check("May 14: the Feb 14 failure still counts (expires May 15)", timeout.record_id in ids(ask("v3.1", k=50)))
clock.set(at(5, 16, 12))
may16 = set(ids(ask("v3.1", k=50)))
check("May 16: it no longer comes back", timeout.record_id not in may16)
check("while the older fix (no expiry) still does", fix_conn.record_id in may16)
hits = {h.record_id for h in store.recall("raise statement_timeout", by=bot, kinds=["episode"], k=20)}
check("recall does not surface the expired failure either", timeout.record_id not in hits)
check("as of May 14 history still shows it in force", timeout.record_id in ids(ask("v3.1", k=50, as_of=at(5, 14, 12))))

print("\n== June 5: the prepared-statements failure happens again; dana records it again")
clock.set(at(6, 5, 9))
check("Jun 5: the Mar 4 failure has expired", prepared.record_id not in ids(ask("v3.1", k=50)))
again = store.write(
    episode(
        P99,
        "disable prepared statements in cart client",
        "failed",
        "https://incidents.example/INC-402",
        version_from="v3.1",
    ),
    by=dana,
)
row = next((e for e in ask("v3.1") if e.record_id == again.record_id), None)
check(
    "the re-recording is new memory with its own 90 days",
    again.action == "inserted" and row is not None and row.expires_at == at(6, 5, 9) + timedelta(days=90),
    f"expires {row.expires_at:%b %d}" if row else "not served",
)
check.finish()
