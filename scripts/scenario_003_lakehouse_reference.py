"""Article 003: the lakehouse reference build — typed, scoped, bi-temporal, governed memory.

Northwind's sales org keeps memory at four levels: the org's pricing ceiling (changed on a
governance cycle), the sales division's playbook (an immutable citation), the EMEA team's
own ceiling, and what rep Ana learned on one customer call (facts, a preference that
expires, an episode with evidence, session notes that live for hours). A quote bot
decides on Mar 3; the team ceiling is corrected retroactively a week later; an auditor
asks what was true and what the bot believed; then the customer asks to be erased:
tombstone, purge, and not one byte of them left under the store root, index included.
Every claim the article makes about the reference build is one check below.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from _scenario import UTC, Checks, SimClock, datetime, parse_store, timedelta, value_of

import memory_lakehouse as ml

path = parse_store(__doc__.splitlines()[0])
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
clock = SimClock(T0)
store = ml.open(path, clock=clock)  # the default local model: fast enough here (~1 s for the whole story)
check = Checks("scenario 003 (lakehouse reference)")
print(f"store: {path}")

# ----------------------------------------------------------------------------- who is who

ORG = ml.Scope("northwind")
SALES = ml.Scope("northwind", "sales")
EMEA = ml.Scope("northwind", "sales", "emea")
APAC = ml.Scope("northwind", "sales", "apac")
governance = ml.Principal("pricing-committee", ORG, role="curator")
sales_ops = ml.Principal("sales-ops", SALES, role="curator")
emea_lead = ml.Principal("emea-lead", EMEA, role="curator")
apac_lead = ml.Principal("apac-lead", APAC, role="curator")
ana = ml.Principal("ana", ml.Scope("northwind", "sales", "emea", "ana"), role="member")
ben = ml.Principal("ben", ml.Scope("northwind", "sales", "emea", "ben"), role="member")  # Ana's teammate
kenji = ml.Principal("kenji", ml.Scope("northwind", "sales", "apac", "kenji"), role="member")
bot = ml.Principal("quote-bot", ml.Scope("northwind", "sales", "emea", "quote-bot"), role="agent")
dpo = ml.Principal("dpo", ORG, role="steward")
outsider = ml.Principal("globex-rep", ml.Scope("globex", "sales", "emea", "ana"), role="member")

PRICING, CEILING = "pricing:discounts", "max_discount"
CUSTOMER = "customer:halvorsen-marine"
PLAYBOOK = "https://wiki.northwind.example/sales/playbook"
# what the customer's memory says, word for word: none of it may survive the purge
CANARIES = ("halvorsen", "SEPA on net-45", "HM-2291", "Gdansk customs", "Ingrid", "SHIP-5120")


def raises(error: type[BaseException], fn) -> bool:
    try:
        fn()
    except error:
        return True
    return False


def about_customer(hits) -> list:
    return [h for h in hits if h.record.subject_name == CUSTOMER or "halvorsen" in h.text.lower()]


def values(hits) -> list:
    return [getattr(h.record, "value", None) or getattr(h.record, "content", None) or h.text for h in hits]


def leftovers(needles=CANARIES) -> dict[str, list[str]]:
    """Files under the store root holding any needle (case-insensitive): the raw bytes of every
    file (data, _delta_log JSON and checkpoints, ledger, index), and each parquet file decoded too
    (compressed pages would hide a value from a raw scan)."""
    found: dict[str, list[str]] = {}
    root = Path(path)
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        texts = [file.read_bytes().decode("latin-1").lower()]
        if file.suffix == ".parquet":
            texts.append(repr(pq.read_table(file).to_pylist()).lower())
        for needle in needles:
            if any(needle.lower() in t for t in texts):
                found.setdefault(needle, []).append(str(file.relative_to(root)))
    return found


def index_files_listing(record_ids) -> list[str]:
    root = Path(path) / "_index"
    return (
        [
            str(p.relative_to(path))
            for p in sorted(root.rglob("*"))
            if p.is_file() and any(rid.encode() in p.read_bytes() for rid in record_ids)
        ]
        if root.is_dir()
        else []
    )


# ----------------------------------------------------------------------------- the story

print("\n== Mar 2, 09:00: memory at every level of the org")
org_ceiling = store.write(
    ml.Fact(
        PRICING,
        CEILING,
        "10% of list",
        T0,
        source="pricing-committee",
        evidence="https://wiki.northwind.example/pricing/2026",
    ),
    by=governance,
    reason="annual governance cycle",
)
playbook_v1 = store.write(
    ml.Reference(PLAYBOOK, "Sales playbook", "Discounts above the team ceiling need a VP.", T0, source="wiki"),
    by=sales_ops,
    scope=SALES,
)
emea_15 = store.write(
    ml.Fact(
        PRICING, CEILING, "15% of list", T0, source="emea-lead", evidence="https://wiki.northwind.example/emea/launch"
    ),
    by=emea_lead,
    scope=EMEA,
    reason="EMEA launch promotion",
)
apac_target = store.write(
    ml.Fact(
        "team:apac", "target_account", "Kiyomizu Logistics renewal", T0, source="apac-lead", evidence="crm:opp/KL-77"
    ),
    by=apac_lead,
    scope=APAC,
)
print("   org ceiling 10%, EMEA team ceiling 15%, sales playbook v1, an APAC-only target account")
check(
    "a member cannot write the org's memory: scope decides who writes where",
    raises(
        ml.PermissionDenied,
        lambda: store.write(ml.Fact(PRICING, CEILING, "50% of list", T0, source="ana"), by=ana, scope=ORG),
    ),
)
check(
    "an agent cannot write memory at all, only propose it",
    raises(
        ml.PermissionDenied, lambda: store.write(ml.Fact(PRICING, CEILING, "20% of list", T0, source="bot"), by=bot)
    ),
)

print("\n== Mar 2, 10:00: Ana's call with Halvorsen Marine")
clock.set(T0 + timedelta(hours=1))
call = clock.now
terms = store.write(
    ml.Fact(
        CUSTOMER,
        "payment_terms",
        "Halvorsen Marine pays by SEPA on net-45 terms",
        call,
        source="crm-sync@v2",
        evidence="crm:call/HM-2291",
    ),
    by=ana,
    reason=f"call notes for {CUSTOMER}",
)
window = store.write(
    ml.Preference(
        CUSTOMER,
        "contact_window",
        "Call Ingrid Halvorsen only after 15:00 CET",
        call,
        ttl=timedelta(days=30),
        source="user_explicit",
        evidence="crm:call/HM-2291",
    ),
    by=ana,
)
customs = store.write(
    ml.Episode(
        "shipping",
        "prod",
        "Halvorsen shipment stuck in Gdansk customs",
        "re-filed the EUR.1 certificate",
        "fixed",
        call,
        evidence="ticket:SHIP-5120",
        subject=CUSTOMER,
        source="support-log",
    ),
    by=ana,
)
follow_up = store.write(
    ml.Note("call-0302", "follow_up", "re-send the Halvorsen Q3 quote tomorrow", subject=CUSTOMER), by=ana
)
draft = store.write(ml.Note("call-0302", "draft_reply", "draft: offer the launch discount again"), by=ana)
guess = store.propose(
    ml.Fact(CUSTOMER, "churn_risk", "Halvorsen churn risk: high", call, source="quote-bot@v1"), by=bot, scope=EMEA
)
print("   a fact, a 30-day preference, an episode, two session notes (4 h TTL), and the bot's proposal")

print("\n-- typed records, distinct lifecycles")
check(
    "an episode without evidence is refused",
    raises(
        ml.ValidationError,
        lambda: store.write(
            ml.Episode("shipping", "prod", "late pallet", "called DHL", "fixed", call, evidence=None, source="ana"),
            by=ana,
        ),
    ),
)
retry = store.write(
    ml.Episode(
        "shipping",
        "prod",
        "Halvorsen shipment stuck in Gdansk customs",
        "asked the broker to expedite",
        "failed",
        call - timedelta(minutes=30),
        evidence="ticket:SHIP-5119",
        subject=CUSTOMER,
        source="support-log",
    ),
    by=ana,
)
tried = store.episodes(service="shipping", env="prod", by=ana)
check(
    "episodes are append-only: a second attempt is a new episode, the first is kept",
    retry.action == "inserted" and {customs.record_id, retry.record_id} <= {e.record_id for e in tried},
    f"{len(tried)} episodes",
)
check(
    "a reference is immutable: new content under the same publication date is refused",
    raises(
        ml.ValidationError,
        lambda: store.write(
            ml.Reference(PLAYBOOK, "Sales playbook", "Discounts are free.", T0, source="wiki"),
            by=sales_ops,
            scope=SALES,
        ),
    ),
)
now_notes = {h.record_id for h in store.recall("follow up quote draft reply", by=ana, kinds=["note"])}
check(
    "session notes are served as working memory while their TTL runs",
    now_notes == {follow_up.record_id, draft.record_id},
)
long_term = {h.record_id for h in store.recall("follow up quote draft reply", by=ana, subject=CUSTOMER, k=20)}
check(
    "they never come back as long-term memory (the default recall)",
    not long_term & {follow_up.record_id, draft.record_id},
    f"{len(long_term)} long-term hits",
)
note_table = {e.table for e in store.audit(record_id=draft.record_id, by=dpo)}
fact_table = {e.table for e in store.audit(record_id=terms.record_id, by=dpo)}
check(
    "working memory lives in its own table, apart from facts",
    note_table == {"note"} and fact_table == {"fact"},
    f"note: {note_table}, fact: {fact_table}",
)
check(
    "the bot's proposal is never recalled as memory",
    guess.record_id not in {h.record_id for h in store.recall("churn risk", by=emea_lead, subject=CUSTOMER)},
)

clock.set(call + timedelta(hours=5))
print("\n== Mar 2, 15:00: the session is over")
check(
    "five hours later the notes have expired (hours of TTL)",
    store.recall("follow up quote draft reply", by=ana, kinds=["note"]) == [],
)
check(
    "as of the call they are still there (working memory is bi-temporal too)",
    len(store.recall("follow up quote draft reply", by=ana, kinds=["note"], as_of=call + timedelta(minutes=5))) == 2,
)
check(
    "what the call taught long-term memory stays: the payment terms",
    getattr(store.get_fact(CUSTOMER, "payment_terms", by=ana), "value", None)
    == "Halvorsen Marine pays by SEPA on net-45 terms",
)

print("\n-- scopes: org → division → team → actor, enforced by the store")
ana_sees = {h.record_id for h in store.recall("discount ceiling playbook payment terms", by=ana, k=20)}
check(
    "Ana sees her own memory and every ancestor's shared memory",
    {playbook_v1.record_id, emea_15.record_id, terms.record_id} <= ana_sees,
)
check(
    "the most specific scope wins a slot: EMEA gets 15%, APAC the org's 10%",
    value_of(store.get_fact(PRICING, CEILING, by=ana)) == "15% of list"
    and value_of(store.get_fact(PRICING, CEILING, by=kenji)) == "10% of list",
)
check(
    "a sibling team never sees APAC's memory",
    store.get_fact("team:apac", "target_account", by=ana) is None
    and apac_target.record_id not in {h.record_id for h in store.recall("Kiyomizu renewal", by=ana, k=20)},
)
probes = [
    ("recall", lambda p: store.recall("Halvorsen payment terms", by=p, subject=CUSTOMER, k=20)),
    (
        "recall + filters",
        lambda p: store.recall("Halvorsen", by=p, subject=CUSTOMER, filters={"attribute": "payment_terms"}),
    ),
    ("recall + subject filter", lambda p: store.recall("Halvorsen", by=p, filters={"subject": CUSTOMER})),
    (
        "recall as of the call",
        lambda p: store.recall("Halvorsen", by=p, subject=CUSTOMER, as_of=call + timedelta(minutes=5)),
    ),
    (
        "recall of every kind",
        lambda p: about_customer(
            store.recall(
                "Halvorsen payment terms Gdansk customs Ingrid",
                by=p,
                kinds=["fact", "preference", "episode", "note"],
                k=50,
                as_of=call + timedelta(minutes=5),
            )
        ),
    ),
    ("get_fact", lambda p: [x for x in [store.get_fact(CUSTOMER, "payment_terms", by=p)] if x]),
    (
        "get_fact (preference)",
        lambda p: [x for x in [store.get_fact(CUSTOMER, "contact_window", by=p, kind="preference")] if x],
    ),
    ("episodes", lambda p: [e for e in store.episodes(service="shipping", env="prod", by=p) if e.subject == CUSTOMER]),
    ("context", lambda p: [1] if "halvorsen" in store.context("Halvorsen call", by=p).lower() else []),
    (
        "replay",
        lambda p: (
            store.replay([("probe", p, "Halvorsen", CUSTOMER, call + timedelta(hours=1))])
            .visible.column("record_id")
            .to_pylist()
        ),
    ),
]
for who in (ben, kenji, outsider):
    leaks = [name for name, probe in probes if probe(who)]
    check(
        f"{who.id} ({who.scope}) never sees Ana's customer memory, whatever is asked",
        not leaks,
        ", ".join(leaks) or f"{len(probes)} reads, none leaked",
    )
widened = []
for cols in ({"actor": "ana"}, {"team": "apac"}, {"org": "northwind", "actor": "ana"}):
    try:
        widened += store.recall("Halvorsen Kiyomizu", by=ben, filters=cols, k=20)
    except ml.ValidationError:
        pass
check("a filter on scope columns cannot widen what a principal sees (refused)", widened == [])

print("\n== Mar 3, 10:00: the quote bot decides with the EMEA ceiling")
decided = T0 + timedelta(days=1, hours=1)
clock.set(decided)
print(f"   quote-bot: 'EMEA may discount up to {value_of(store.get_fact(PRICING, CEILING, by=bot))}'")
clock.set(T0 + timedelta(days=2))
retention = store.purge(by=dpo)
print(f"   Mar 4, retention purge: {retention.summary().splitlines()[0]}")
check(
    "session state has its own retention: the purge erases the two expired notes and nothing else",
    retention.rows.get("note") == 2 and sum(retention.rows.values()) == 2 and retention.expired_rows == 2,
    f"rows {retention.rows}",
)
check(
    "the purge's own byte scan verifies the notes are gone",
    retention.verified is True,
    f"verified={retention.verified}, leftovers {list(retention.leftovers)}",
)
note_bytes = leftovers(("offer the launch discount again", "re-send the Halvorsen Q3", "call-0302"))
check(
    "no byte of the expired notes is left (value or session id), in any file",
    not note_bytes,
    "; ".join(f"{k!r} in {v}" for k, v in note_bytes.items()),
)
check(
    "the long-term fact learned on the same call is kept",
    getattr(store.get_fact(CUSTOMER, "payment_terms", by=ana), "value", None)
    == "Halvorsen Marine pays by SEPA on net-45 terms",
)

print("\n== Mar 10: the pricing review cuts the EMEA ceiling to 12%, effective Mar 3 09:00")
clock.set(T0 + timedelta(days=8))
review = store.write(
    ml.Fact(
        PRICING,
        CEILING,
        "12% of list",
        T0 + timedelta(days=1),
        source="emea-lead",
        evidence="https://wiki.northwind.example/emea/q1-review",
    ),
    by=emea_lead,
    scope=EMEA,
    reason="Q1 pricing review",
)
again = store.write(
    ml.Fact(PRICING, CEILING, "12% of list", T0 + timedelta(days=1), source="emea-lead"), by=emea_lead, scope=EMEA
)
check(
    "facts are slowly changing: the correction supersedes 15% with a pointer",
    review.action == "superseded" and review.supersedes == emea_15.record_id,
)
check("restating it is a duplicate, not a new version", again.action == "duplicate")

print("\n-- bi-temporal reads: valid time in the row, system time from the Delta log")
clock.set(T0 + timedelta(days=10))
now_fact = store.get_fact(PRICING, CEILING, by=bot)
then_valid = store.get_fact(PRICING, CEILING, by=bot, valid_at=decided)
believed = store.get_fact(PRICING, CEILING, by=bot, as_of=decided)
assert now_fact and then_valid and believed, "the bot sees the EMEA ceiling now, then and as believed then"
print(
    f"   true now: {now_fact.value}; true on Mar 3 (as known now): {then_valid.value}; "
    f"believed when deciding: {believed.value}"
)
check("what is true now: 12%", now_fact.value == "12% of list")
check(
    "what was true at the decision, as we know now: 12% (the correction is retroactive)",
    then_valid.value == "12% of list",
)
check(
    "what we believed when we decided: 15% (as_of replays the store at the decision)",
    believed.value == "15% of list" and believed.record_id == emea_15.record_id,
)
rep = store.replay([("quote-0303", bot, "max discount for EMEA", PRICING, decided)])
seen = set(rep.visible.column("record_id").to_pylist())
check(
    "replaying the decision sees the 15% row and not the later correction, leakage 0",
    emea_15.record_id in seen and review.record_id not in seen and rep.leakage_rate == 0.0,
    f"leakage {rep.leakage_rate:.0%}",
)
check(
    "system time is the commit's, not the row's: the correction is known since Mar 10, valid since Mar 3",
    now_fact.known_since == review.known_since == T0 + timedelta(days=8)
    and now_fact.valid_from == T0 + timedelta(days=1),
)
events = store.audit(record_id=emea_15.record_id, by=dpo)
check(
    "the audit trail is the commit log: who wrote 15% and who superseded it, when and why",
    [(e.operation, e.actor, e.reason) for e in events]
    == [("write", "emea-lead", "EMEA launch promotion"), ("write", "emea-lead", "Q1 pricing review")]
    and [(e.version, e.committed_at) for e in events]
    == [(emea_15.version, emea_15.known_since), (review.version, review.known_since)],
    "; ".join(f"v{e.version} {e.operation} by {e.actor} ({e.reason})" for e in events),
)
check(
    "every memory carries its provenance: writer, evidence, authority, scope",
    now_fact.source == "emea-lead"
    and (now_fact.evidence or "").endswith("q1-review")
    and now_fact.authority == "human_confirmed"
    and now_fact.scope == EMEA,
)
check("only a steward audits", raises(ml.PermissionDenied, lambda: store.audit(subject=PRICING, by=emea_lead)))

print("\n== Mar 22: the playbook is republished")
clock.set(T0 + timedelta(days=20))
playbook_v2 = store.write(
    ml.Reference(
        PLAYBOOK,
        "Sales playbook",
        "Discounts above the team ceiling need a CFO.",
        T0 + timedelta(days=20),
        source="wiki",
    ),
    by=sales_ops,
    scope=SALES,
)
cited = store.recall("who approves discounts above the ceiling", by=ana, kinds=["reference"], filters={"uri": PLAYBOOK})
cited_then = store.recall(
    "who approves discounts above the ceiling", by=ana, kinds=["reference"], filters={"uri": PLAYBOOK}, as_of=decided
)
check(
    "a reference changes only by a new publication; the old citation stays readable as of then",
    playbook_v2.action == "superseded"
    and values(cited) == ["Discounts above the team ceiling need a CFO."]
    and values(cited_then) == ["Discounts above the team ceiling need a VP."],
)

print("\n== Apr 11: the contact-window preference has expired")
clock.set(T0 + timedelta(days=40))
check(
    "preferences expire (30-day TTL): not served now",
    store.get_fact(CUSTOMER, "contact_window", by=ana, kind="preference") is None,
)
check(
    "but as of Mar 12 Ana's store held it",
    getattr(
        store.get_fact(CUSTOMER, "contact_window", by=ana, kind="preference", as_of=T0 + timedelta(days=10)),
        "value",
        None,
    )
    == "Call Ingrid Halvorsen only after 15:00 CET",
)

print("\n== Apr 16: Halvorsen Marine asks to be erased")
clock.set(T0 + timedelta(days=45))
before = leftovers()
check(
    "(control) the byte scan finds the customer's content before forgetting",
    "halvorsen" in before and "SEPA on net-45" in before,
    ", ".join(sorted(before)),
)
other_store = ml.open(path, clock=clock, embedder=ml.HashingEmbedder())
check(
    "(control) the index is derived: a store opened with another embedder builds one from the tables",
    terms.record_id in {h.record_id for h in other_store.recall("payment terms SEPA", by=ana, subject=CUSTOMER)},
)
check(
    "(control) recall finds the customer today",
    terms.record_id in {h.record_id for h in store.recall("Halvorsen payment terms", by=ana, subject=CUSTOMER)},
)
customer_ids = {
    terms.record_id,
    window.record_id,
    customs.record_id,
    retry.record_id,
    follow_up.record_id,
    guess.record_id,
}
forgot = store.forget(CUSTOMER, by=dpo, reason=f"erasure request from {CUSTOMER} (GDPR art. 17)")
print(f"   forget: generation {forgot.generation}, {len(forgot.record_ids)} record(s) tombstoned")
check(
    "the tombstone covers every kind of the customer's memory, proposals included",
    (customer_ids - {follow_up.record_id}) <= set(forgot.record_ids),
)  # the note was purged on Mar 4
served = {
    "recall now": store.recall("Halvorsen payment terms", by=ana, subject=CUSTOMER, k=20),
    "recall as of the call": store.recall(
        "Halvorsen payment terms", by=ana, subject=CUSTOMER, as_of=call + timedelta(minutes=5)
    ),
    "recall, every kind": [
        h
        for h in store.recall(
            "Halvorsen Gdansk customs Ingrid", by=ana, k=50, kinds=["fact", "preference", "episode", "note"]
        )
        if h.record_id in customer_ids
    ],
    "get_fact": [x for x in [store.get_fact(CUSTOMER, "payment_terms", by=ana)] if x],
    "get_fact as of the call": [
        x for x in [store.get_fact(CUSTOMER, "payment_terms", by=ana, as_of=call + timedelta(hours=1))] if x
    ],
    "episodes": [
        e for e in store.episodes(service="shipping", env="prod", by=ana, valid_at=call) if e.subject == CUSTOMER
    ],
}
check(
    "forget is effective at once, at every basis (tombstone)",
    not any(served.values()),
    ", ".join(k for k, v in served.items() if v) or f"{len(served)} reads, nothing served",
)
check("the bytes stay until the purge (two phases, not a one-off delete)", "halvorsen" in leftovers())

report = store.purge(by=dpo)
print("   " + report.summary().replace("\n", "\n   "))
check(
    "purge erases the rows physically and verifies it",
    report.verified is True and report.files_rewritten > 0,
    f"{sum(report.rows.values())} row(s), {report.bytes_reclaimed} bytes reclaimed",
)
after = leftovers()
check(
    "no byte of the customer's content anywhere under the store root (data, _delta_log, ledger, index)",
    not after,
    "; ".join(f"{k!r} in {v}" for k, v in after.items()) or "every file scanned, raw and decoded",
)
held = index_files_listing(customer_ids)
check("no index file (of either embedder) lists an erased record", not held, ", ".join(held))
check(
    "recall and get_fact never return it again",
    not store.recall("Halvorsen payment terms SEPA", by=ana, subject=CUSTOMER, k=20)
    and store.get_fact(CUSTOMER, "payment_terms", by=ana) is None
    and not {h.record_id for h in store.recall("Halvorsen Gdansk customs", by=ana, k=50)} & customer_ids,
)
rebuilt = store.rebuild_index()
check(
    "rebuilding the index from the store brings nothing back",
    rebuilt == ["northwind"]
    and not {h.record_id for h in store.recall("Halvorsen payment terms SEPA Gdansk", by=ana, k=50)} & customer_ids
    and not index_files_listing(customer_ids)
    and not leftovers(),
)
check(
    "while everyone else's memory is recalled from the rebuilt index",
    bool({emea_15.record_id, review.record_id} & {h.record_id for h in store.recall("EMEA discount ceiling", by=ana)})
    and playbook_v2.record_id in {h.record_id for h in store.recall("playbook discounts VP CFO", by=ana)},
)
check(
    "and everyone else's history survives: as of the decision the bot still believed 15%",
    value_of(store.get_fact(PRICING, CEILING, by=bot, as_of=decided)) == "15% of list"
    and store.replay([("quote-0303", bot, "max discount", PRICING, decided)]).leakage_rate == 0.0,
)
trail = store.audit(subject=CUSTOMER, by=dpo)
ops = [e.operation for e in trail]
print("   audit of the erased subject:", ", ".join(f"{e.operation} by {e.actor}" for e in trail))
check(
    "the audit trail still answers who acted, when and why — after the purge",
    "write" in ops
    and "propose" in ops
    and ops[-2:] == ["forget", "purge"]
    and {"ana", "quote-bot", "dpo"} <= {e.actor for e in trail},
)
check(
    "and holds no content: not the name, not a value",
    not any(c.lower() in repr(trail).lower() for c in CANARIES),
    "the write's reason reads: " + next((e.reason for e in trail if e.reason and "call notes" in e.reason), "?"),
)
check.finish()
