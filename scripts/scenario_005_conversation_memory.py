"""Article 001, from raw chat turns: capture → extract → reconcile → use → forget.

Day 1 the user greets the assistant, says they are on the Free Starter plan, live in
Seattle, prefer pytest, and pastes an API key. Day 14 they upgrade to Enterprise Pro and
restate the pytest preference. Day 30 they say "I moved to Austin". Memory must serve the
current plan and city, keep the history for as-of reads, count the restated preference
instead of versioning it, and never turn a greeting or the key into memory. Last, the
user asks to be forgotten while an extraction job is still running: the job's results
are dropped and a purge leaves none of their words on disk.
"""

import threading
from pathlib import Path

from _scenario import UTC, Checks, SimClock, datetime, parse_store, timedelta

import memory_lakehouse as ml

path = parse_store(__doc__.splitlines()[0])
day1 = datetime(2026, 9, 1, 9, tzinfo=UTC)
clock = SimClock(day1)
store = ml.open(path, clock=clock)
check = Checks("scenario 005 (conversation memory)")
user = "usr_42"
app = ml.Principal("support-app", ml.Scope("cust_acme_corp", "accounts", "team-a", "usr_42"), role="member")
dpo = ml.Principal("dpo", ml.Scope("cust_acme_corp"), role="steward")
KEY = "sk_live_51HxQpAcmeCorpDeployKey0042"


def chat(session: str, *lines: tuple[str, str]) -> ml.CaptureJob:
    job = store.capture(session, [{"role": role, "text": text} for role, text in lines], by=app, subject=user)
    print(
        f"  {session}: {len(job.turns)} turn(s) -> "
        + (", ".join(f"{r.kind} {r.action}" for r in job.result().results) or "nothing extracted")
    )
    return job


print(f"store: {path}")
print("Day 1")
s1 = chat(
    "chat-1",
    ("user", "Hi there!"),
    ("assistant", "Hello! How can I help you today?"),
    ("user", "I'm on the Free Starter plan."),
    ("user", "I live in Seattle."),
    ("user", "My preferred test runner is pytest with parallel execution."),
    ("user", f"Here is my API key {KEY} for the deploy"),
    ("assistant", "Maybe it's the pool?"),
)
clock.set(day1 + timedelta(days=13))
print("Day 14")
s2 = chat(
    "chat-2",
    ("user", "Hey!"),
    ("user", "I just upgraded to Enterprise Pro!"),
    ("user", "My preferred test runner is pytest with parallel execution."),
)
clock.set(day1 + timedelta(days=29))
print("Day 30")
s3 = chat("chat-3", ("user", "Thanks!"), ("user", "I moved to Austin."))

greeting_turns = {s1.turns[0].record_id, s1.turns[1].record_id, s2.turns[0].record_id, s3.turns[0].record_id}
store.lake.refresh()
extracted = [r for kind in ("fact", "preference", "memory") for r in store.lake.known_rows(kind).to_pylist()]
check("greetings and filler never become memory", not any(set(r["derived_from"]) & greeting_turns for r in extracted))
check("speculation never becomes memory", not any(s1.turns[6].record_id in r["derived_from"] for r in extracted))
check("the pasted API key is redacted in the stored turn", s1.turns[5].redacted == ("api_key",))
check(
    "the API key never becomes memory",
    not any(s1.turns[5].record_id in r["derived_from"] for r in extracted)
    and not any(KEY in repr(r) for r in extracted),
)
holding = [p for p in Path(path).rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
check("no file under the store holds the API key", not holding, ", ".join(map(str, holding)))

upgrade = s2.result().results[0]
check(
    "the upgrade supersedes the old plan with a pointer",
    upgrade.action == "superseded" and upgrade.supersedes == s1.result().results[0].record_id,
)
restated = s2.result().results[1]
check(
    "the restated preference is a duplicate, not a new version",
    restated.action == "duplicate" and s2.result().sightings == 1,
)
seen = store.seen(restated.record_id, by=app)
check(
    "its seen-count is 2 and last seen day 14",
    (seen.count, seen.last_seen) == (2, day1 + timedelta(days=13)),
    f"{seen.count} x, last {seen.last_seen}",
)

clock.set(day1 + timedelta(days=31))
print("Day 32: 'Can I invite 50 team members to my organization?'")
hits = store.recall("Can I invite 50 team members to my organization?", by=app, subject=user)
plans = [
    h.record.value for h in hits if isinstance(h.record, (ml.Fact, ml.Preference)) and h.record.attribute == "plan"
]
check("the question sees only the current plan", plans == ["Enterprise Pro"], str(plans))
city = store.get_fact(user, "city", by=app)
check(
    "the current city served is Austin", city is not None and city.value == "Austin", getattr(city, "value", "nothing")
)
cities = [
    h.record.value
    for h in store.recall("where does the user live? city", by=app, subject=user, k=8)
    if isinstance(h.record, (ml.Fact, ml.Preference)) and h.record.attribute == "city"
]
check("recall serves Austin, not Seattle", cities == ["Austin"], str(cities))
then = store.get_fact(user, "city", by=app, as_of=day1 + timedelta(days=20))
check("as of day 21 the city was Seattle", then is not None and then.value == "Seattle")
runner = store.get_fact(user, "test_runner", by=app, kind="preference")
check("the preference is served", runner is not None and runner.value == "pytest with parallel execution")

print("Day 33: the user asks to be forgotten while an extraction job is still running")
clock.set(day1 + timedelta(days=32))


class Delayed(ml.RuleExtractor):
    name = "delayed@1"
    started, release = threading.Event(), threading.Event()

    def extract(self, turns, subject=None):
        self.started.set()
        self.release.wait(60)
        return super().extract(turns, subject)


with ml.ExtractionWorker() as worker:
    late = store.capture(
        "chat-4",
        [{"role": "user", "text": "My timezone is US Central."}],
        by=app,
        subject=user,
        extractor=Delayed(),
        worker=worker,
    )
    Delayed.started.wait(60)
    store.forget(user, by=dpo, reason="erasure request")
    Delayed.release.set()
    dropped = late.result(timeout=60)
check("the job still running across the forget drops its results", dropped.status == "dropped", dropped.reason or "")
check(
    "nothing of the user is served any more",
    not store.recall("plan city test runner timezone", by=app, subject=user, kinds=None, k=20)
    and not store.recall("Seattle Austin pytest", by=app, kinds=["turn"], k=20),
)
report = store.purge(by=dpo)
check("purge verified by a byte scan", bool(report.verified), ", ".join(report.leftovers))
words = ["I live in Seattle.", "I moved to Austin.", "pytest with parallel execution", "Enterprise Pro"]
left = [w for w in words for p in Path(path).rglob("*") if p.is_file() and w.encode() in p.read_bytes()]
check("none of the user's words are left on disk", not left, ", ".join(left))
check.finish()
