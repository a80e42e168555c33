"""Write ``fixture.jsonl``: a labelled retrieval fixture for `evals.retrieval`.

Two orgs with realistic memory: *acme* (a SaaS vendor: support tiers 1 and 2, an SRE
on-call team) and *northwind* (an online shop: returns and payments teams). Every
memory and query below is written by hand; nothing is sampled, so the file is the
same on every run (``python data/retrieval/make_fixture.py``).

Each query is what a support agent or on-call engineer would actually type, phrased
the way they would say it, not the way the memory is worded (names of customers,
orders and services stay: people use them). Each names the one memory that answers it.

Memory roles:

* ``answer``      — the memory a query is labelled with;
* ``superseded``  — an older value of an answer's slot (same subject+attribute, same
  URI, same scope, earlier valid time): the store must never serve it as current;
* ``sibling``     — memory in a scope the querying principal cannot read (a sibling
  team or another agent's private scope), often the very same text;
* ``near_miss``   — visible and lexically close to a query, but not its answer;
* ``background``  — the rest of a realistic store.

JSONL lines: one ``{"type": "meta", ...}``, then ``{"type": "memory", "label", "kind",
"scope", "role", "fields"}`` (fields are the record's constructor arguments, times as
ISO-8601 UTC), then ``{"type": "query", "qid", "principal", "text", "answer", "batch"}``.
Principals are listed in the meta line (id -> scope path; all are members). Each query
also carries ``"batch"``: the batch it was written in.

Batch 2 (queries q84 onward) was written after the ranking constant (the fusion weight)
had been chosen on batch 1's dev split, and before any ranking was run on it. It makes
the store larger and closer to a real one: a customer, order or service a query names
has several other memories its asker can read (other attributes, near misses, older
versions of the answer's slot, copies in a sibling team's scope), so the name alone
does not identify the answer; about half of its queries name no subject at all.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # the store's clock when the fixture is loaded
PREFERENCE_TTL = timedelta(days=180)  # records.PREFERENCE_TTL: a preference older than this has expired
FAILED_EPISODE_TTL = timedelta(days=90)

PRINCIPALS = {
    "alice": "acme/support/tier2/alice",  # tier-2 support agent
    "ben": "acme/support/tier1/ben",  # tier-1 support agent
    "dana": "acme/sre/oncall/dana",  # on-call engineer
    "omar": "northwind/commerce/returns/omar",
    "pia": "northwind/commerce/payments/pia",
}

MEMORIES: list[dict] = []
QUERIES: list[dict] = []
CURRENT_BATCH = 1  # the batch queries are written in; switched to 2 before batch 2's sections


def _when(day: str) -> str:
    return datetime.fromisoformat(day).replace(tzinfo=UTC).isoformat()


def _add(label: str, kind: str, scope: str, role: str, fields: dict) -> None:
    MEMORIES.append({"type": "memory", "label": label, "kind": kind, "scope": scope, "role": role, "fields": fields})


def F(label, scope, day, subject, attribute, value, role="answer", source="crm-sync@v3"):
    org = scope.split("/")[0]
    _add(
        label,
        "fact",
        scope,
        role,
        {
            "subject": subject,
            "attribute": attribute,
            "value": value,
            "valid_from": _when(day),
            "source": source,
            "evidence": f"https://crm.{org}.example/{subject.replace(':', '/')}",
        },
    )


def P(label, scope, day, subject, attribute, value, role="answer", source="ticket-summariser@v4"):
    org = scope.split("/")[0]
    _add(
        label,
        "preference",
        scope,
        role,
        {
            "subject": subject,
            "attribute": attribute,
            "value": value,
            "valid_from": _when(day),
            "source": source,
            "evidence": f"https://helpdesk.{org}.example/notes/{label}",
        },
    )


def E(label, scope, day, service, symptom, action, outcome, evidence, role="answer", env="prod"):
    _add(
        label,
        "episode",
        scope,
        role,
        {
            "service": service,
            "env": env,
            "symptom": symptom,
            "action": action,
            "outcome": outcome,
            "observed_at": _when(day),
            "evidence": evidence,
            "source": "incident-bot@v2",
        },
    )


def R(label, scope, day, uri, title, content, role="answer", source="kb-publisher@v5"):
    _add(
        label,
        "reference",
        scope,
        role,
        {"uri": uri, "title": title, "content": content, "published_at": _when(day), "source": source},
    )


def Q(qid, who, text, answer):
    QUERIES.append(
        {"type": "query", "qid": qid, "principal": who, "text": text, "answer": answer, "batch": CURRENT_BATCH}
    )


# =============================================================================== acme
# Customer accounts: shared by both support tiers (acme/support) or the whole company.

F(
    "globex-plan",
    "acme/support",
    "2025-11-03",
    "customer:globex",
    "plan",
    "Enterprise Pro, which allows up to 500 members and includes SSO and the audit log",
)
F(
    "globex-plan-old",
    "acme/support",
    "2025-02-10",
    "customer:globex",
    "plan",
    "Business, capped at 150 members",
    role="superseded",
)
F(
    "globex-onboarding",
    "acme/support",
    "2025-11-10",
    "customer:globex",
    "onboarding",
    "every person added to the account is invited to a 30-minute training call",
    role="near_miss",
)
Q("q01", "alice", "How many more people can Globex bring onto their account?", "globex-plan")

F(
    "globex-sso",
    "acme/support",
    "2025-08-14",
    "customer:globex",
    "sso_provider",
    "Okta over SAML; password login is switched off for their domain",
)
F(
    "globex-sso-tier1",
    "acme/support/tier1",
    "2025-08-14",
    "customer:globex",
    "sso_provider",
    "Okta over SAML; password login is switched off for their domain",
    role="sibling",
)
Q(
    "q02",
    "alice",
    "A Globex employee keeps getting rejected on the normal sign-in form. How are they supposed to get in?",
    "globex-sso",
)

F(
    "globex-region",
    "acme/support",
    "2025-03-01",
    "customer:globex",
    "data_region",
    "EU-Central (Frankfurt); their contract forbids moving data outside the EU",
)
R(
    "kb-bug-repro",
    "acme/support",
    "2025-04-22",
    "kb://acme/reproducing-customer-bugs",
    "Reproducing customer bugs",
    "Use the workspace clone tool to copy a workspace into the debug cluster; never ask a customer for their password.",
    role="near_miss",
)
Q("q03", "alice", "Could we copy the Globex workspace onto a machine in the US to reproduce a bug?", "globex-region")

F(
    "globex-csm",
    "acme",
    "2026-01-05",
    "customer:globex",
    "account_owner",
    "Priya Raman in customer success (backup: Tom Ellis)",
)
F(
    "globex-csm-old",
    "acme",
    "2025-04-01",
    "customer:globex",
    "account_owner",
    "Marco Diaz in customer success",
    role="superseded",
)
Q("q04", "alice", "Who looks after the Globex relationship on our side these days?", "globex-csm")

P(
    "globex-contact",
    "acme/support",
    "2025-11-20",
    "customer:globex",
    "contact_channel",
    "email only; no phone calls before 10:00 CET",
)
Q("q05", "alice", "Is it OK to ring the Globex admin first thing in the morning?", "globex-contact")

F(
    "initech-plan",
    "acme/support",
    "2026-01-20",
    "customer:initech",
    "plan",
    "Team plan: 25 members, no single sign-on, community support only",
)
F(
    "initech-plan-old",
    "acme/support",
    "2025-06-01",
    "customer:initech",
    "plan",
    "Starter plan: 10 members, no single sign-on",
    role="superseded",
)
F(
    "initech-billing-contact",
    "acme/support",
    "2025-09-03",
    "customer:initech",
    "billing_contact",
    "IT manager Bill Lumbergh receives the invoices; they pay through the Azure Marketplace",
    role="near_miss",
)
Q(
    "q06",
    "ben",
    "Initech's IT guy wants staff to log in with their Azure AD accounts. Do they get that?",
    "initech-plan",
)

F(
    "initech-billing",
    "acme/support",
    "2025-02-01",
    "customer:initech",
    "billing_cycle",
    "annual, invoiced each February; every invoice must quote their purchase order number",
)
Q("q07", "ben", "Initech's finance people are asking how often we bill them. What do I tell them?", "initech-billing")

F(
    "initech-jira",
    "acme/support/tier2",
    "2025-10-12",
    "customer:initech",
    "integration_issue",
    "the Jira Cloud connector stops syncing whenever their Jira admin rotates the API token; reconnect it "
    "from Settings > Integrations",
)
F(
    "initech-jira-tier1",
    "acme/support/tier1",
    "2025-10-12",
    "customer:initech",
    "integration_issue",
    "Jira connector problems: hand the ticket to tier 2",
    role="sibling",
)
Q(
    "q08",
    "alice",
    "Tickets from Initech's issue tracker stopped showing up in the app again. Any idea why?",
    "initech-jira",
)

P("initech-currency", "acme/support", "2026-01-10", "customer:initech", "invoice_currency", "EUR rather than USD")
Q("q09", "ben", "Initech's accountant asked about euros versus dollars. What did they settle on?", "initech-currency")

F(
    "umbrella-tier",
    "acme/support",
    "2025-09-01",
    "customer:umbrella",
    "support_tier",
    "Premium: first response within 1 hour, 24/7 phone line",
)
F(
    "umbrella-tier-old",
    "acme/support",
    "2025-01-15",
    "customer:umbrella",
    "support_tier",
    "Standard: response by the next business day",
    role="superseded",
)
F(
    "umbrella-cases",
    "acme/support",
    "2025-12-01",
    "customer:umbrella",
    "case_volume",
    "opens about 40 cases a month, mostly about permissions",
    role="near_miss",
)
Q("q10", "ben", "How quickly do we owe Umbrella a reply when they open a case?", "umbrella-tier")

F(
    "umbrella-escalation",
    "acme/support/tier2",
    "2025-07-07",
    "customer:umbrella",
    "escalation_contact",
    "IT director Helen Cho; never escalate to the end user's manager",
)
F(
    "umbrella-escalation-tier1",
    "acme/support/tier1",
    "2025-07-07",
    "customer:umbrella",
    "escalation_contact",
    "service desk lead Raj Patel",
    role="sibling",
)
Q(
    "q11",
    "alice",
    "The Umbrella situation is getting heated. Who on their side should I bring in?",
    "umbrella-escalation",
)

P("umbrella-window", "acme/support", "2025-12-15", "customer:umbrella", "change_window", "Sundays 02:00-06:00 UTC only")
Q("q12", "ben", "When are we allowed to touch Umbrella's configuration?", "umbrella-window")

F(
    "hooli-ratelimit",
    "acme",
    "2025-12-02",
    "customer:hooli",
    "api_rate_limit",
    "1,200 requests per minute under a custom contract addendum",
)
F(
    "hooli-ratelimit-old",
    "acme",
    "2025-03-10",
    "customer:hooli",
    "api_rate_limit",
    "600 requests per minute (the default)",
    role="superseded",
)
F(
    "hooli-integration",
    "acme/support",
    "2025-06-18",
    "customer:hooli",
    "integration",
    "their integration posts build results from Jenkins into a #deploys channel",
    role="near_miss",
)
Q(
    "q13",
    "alice",
    "Hooli's integration keeps getting throttled. How many calls are they entitled to?",
    "hooli-ratelimit",
)

F(
    "hooli-staging",
    "acme/support",
    "2025-05-05",
    "customer:hooli",
    "test_environment",
    "a separate staging workspace, hooli-staging, for trying changes before production",
)
Q("q14", "alice", "Is there somewhere safe to try out a fix for Hooli first?", "hooli-staging")

P(
    "hooli-report",
    "acme/support",
    "2026-01-05",
    "customer:hooli",
    "usage_report",
    "weekly, as a CSV attachment rather than a dashboard link",
)
Q("q15", "alice", "How does Hooli want to receive their consumption numbers?", "hooli-report")

F(
    "soylent-status",
    "acme",
    "2026-02-25",
    "customer:soylent",
    "contract_status",
    "gave 30 days' notice; the cancellation takes effect on 2026-03-31",
)
F(
    "soylent-status-old",
    "acme",
    "2025-06-01",
    "customer:soylent",
    "contract_status",
    "active, renewing automatically every year",
    role="superseded",
)
Q("q16", "alice", "Is Soylent planning to leave us?", "soylent-status")

F(
    "soylent-discount",
    "acme/support",
    "2025-06-15",
    "customer:soylent",
    "discount",
    "15% nonprofit discount, approved by finance",
)
Q("q17", "ben", "Why is Soylent paying less than list price?", "soylent-discount")

F(
    "wonka-storage",
    "acme/support",
    "2026-02-20",
    "customer:wonka",
    "storage_quota",
    "2 TB pooled storage, 91% used as of February",
)
F(
    "wonka-storage-old",
    "acme/support",
    "2025-04-01",
    "customer:wonka",
    "storage_quota",
    "1 TB pooled storage",
    role="superseded",
)
R(
    "kb-upload-limits",
    "acme/support",
    "2025-05-30",
    "kb://acme/upload-limits",
    "Upload limits",
    "A single file can be up to 5 GB; uploads above that fail with a size error.",
    role="near_miss",
)
Q("q18", "alice", "Wonka users say their uploads keep failing. Could they be out of space?", "wonka-storage")

P(
    "wonka-tone",
    "acme/support/tier2",
    "2025-11-01",
    "customer:wonka",
    "reply_style",
    "short, plain-language replies; their admin is not technical",
)
P(
    "wonka-tone-tier1",
    "acme/support/tier1",
    "2025-11-01",
    "customer:wonka",
    "reply_style",
    "short, plain-language replies; their admin is not technical",
    role="sibling",
)
Q("q19", "alice", "How much jargon can I use when writing back to Wonka?", "wonka-tone")

F(
    "tyrell-baa",
    "acme/support",
    "2025-08-01",
    "customer:tyrell",
    "compliance",
    "signed a HIPAA business associate agreement: no patient data in screenshots or attachments sent to support",
)
Q("q20", "alice", "Can I ask Tyrell for a screen capture of the chart view that's misbehaving?", "tyrell-baa")

F(
    "cyberdyne-ar",
    "acme",
    "2026-02-15",
    "customer:cyberdyne",
    "payment_status",
    "January invoice 45 days overdue; account is in collections, do not offer upgrades or add-ons",
)
F(
    "cyberdyne-ar-old",
    "acme",
    "2025-12-01",
    "customer:cyberdyne",
    "payment_status",
    "paid in full, nothing outstanding",
    role="superseded",
)
F(
    "cyberdyne-interest",
    "acme/support",
    "2025-10-20",
    "customer:cyberdyne",
    "expansion_interest",
    "asked about the premium bundle during the October business review",
    role="near_miss",
)
Q("q21", "alice", "Would now be a good time to pitch Cyberdyne the premium bundle?", "cyberdyne-ar")

F(
    "dunder-admin",
    "acme/support",
    "2025-10-01",
    "customer:dunder-mifflin",
    "workspace_admin",
    "Angela Martin; only she can approve new integrations",
)
F(
    "dunder-admin-old",
    "acme/support",
    "2025-03-01",
    "customer:dunder-mifflin",
    "workspace_admin",
    "Dwight Schrute",
    role="superseded",
)
Q("q22", "ben", "Who at Dunder Mifflin can green-light installing a new app?", "dunder-admin")

F(
    "piedpiper-hosting",
    "acme/support",
    "2025-11-11",
    "customer:pied-piper",
    "deployment",
    "self-hosted on their own Kubernetes cluster, release 4.2 LTS",
)
Q("q23", "alice", "Does Pied Piper run on our cloud or on their own servers?", "piedpiper-hosting")

F(
    "stark-contract",
    "acme",
    "2025-09-30",
    "customer:stark",
    "contract_term",
    "multi-year agreement renewing on 2027-09-30; any price change needs VP sign-off",
)
Q("q24", "ben", "How long is Stark locked in with us?", "stark-contract")

P(
    "vandelay-language",
    "acme/support",
    "2025-12-01",
    "customer:vandelay",
    "support_language",
    "Spanish, handled by the Madrid team",
)
P(
    "vandelay-language-old",
    "acme/support",
    "2025-10-01",
    "customer:vandelay",
    "support_language",
    "English",
    role="superseded",
)
Q("q25", "alice", "What language should I answer Vandelay's tickets in?", "vandelay-language")

# An agent's own working preferences live in its private scope.
P(
    "alice-summary",
    "acme/support/tier2/alice",
    "2026-01-12",
    "agent:alice",
    "summary_format",
    "bullet points, at most five, newest first",
    source="user_explicit",
)
P(
    "bob-summary",
    "acme/support/tier2/bob",
    "2026-01-12",
    "agent:bob",
    "summary_format",
    "one narrative paragraph",
    role="sibling",
    source="user_explicit",
)
Q("q26", "alice", "How do I like my case recaps laid out?", "alice-summary")

# Knowledge base articles.
R(
    "kb-saml-rotation",
    "acme/support",
    "2025-10-01",
    "kb://acme/saml-certificate-rotation",
    "Rotating the SAML signing certificate",
    "Upload the new certificate under Admin > Security before the old one lapses; both stay valid for 72 hours "
    "so nobody is locked out.",
)
R(
    "kb-saml-rotation-old",
    "acme/support",
    "2025-01-01",
    "kb://acme/saml-certificate-rotation",
    "Rotating the SAML signing certificate",
    "Upload the new certificate under Admin > Security before the old one lapses; both stay valid for 24 hours.",
    role="superseded",
)
Q(
    "q27",
    "ben",
    "The customer's identity provider cert expires next week. How do we swap it without shutting people out?",
    "kb-saml-rotation",
)

R(
    "kb-export",
    "acme",
    "2025-05-20",
    "kb://acme/export-workspace",
    "Exporting a workspace",
    "Owners can download a full archive from Settings > Data. Archives over 50 GB are split into parts and sent "
    "as links within 24 hours.",
)
Q("q28", "ben", "A customer wants a copy of everything they've stored with us. How do they get it?", "kb-export")

R(
    "kb-remove-member",
    "acme/support",
    "2025-06-02",
    "kb://acme/remove-member",
    "Removing a member",
    "Deactivating someone keeps their files in the workspace; deleting the account hands their files to an admin "
    "after 30 days.",
)
Q("q29", "alice", "When an employee quits, what happens to the documents they owned?", "kb-remove-member")

R(
    "kb-2fa",
    "acme/support",
    "2025-04-15",
    "kb://acme/reset-two-factor",
    "Resetting two-factor authentication",
    "Only a workspace admin can reset a member's second factor. Support must never disable it because of a phone "
    "or chat request.",
)
R(
    "kb-lost-device",
    "acme/support",
    "2025-04-15",
    "kb://acme/lost-device",
    "Lost or stolen laptops",
    "If a device is lost, an admin can sign it out remotely from Admin > Devices; files cached on it are wiped "
    "when it next connects.",
    role="near_miss",
)
Q("q30", "ben", "Caller lost their phone and can't get the login code. Can I switch it off for them?", "kb-2fa")

R(
    "kb-annual-refunds",
    "acme",
    "2025-07-01",
    "kb://acme/annual-refunds",
    "Refunds on annual plans",
    "Annual subscriptions are refunded pro rata if cancelled within the first 30 days; after that we only issue "
    "account credit.",
)
R(
    "kb-annual-refunds-old",
    "acme",
    "2024-12-01",
    "kb://acme/annual-refunds",
    "Refunds on annual plans",
    "Annual subscriptions are refunded pro rata if cancelled within the first 14 days.",
    role="superseded",
)
Q(
    "q31",
    "ben",
    "Someone paid for a whole year two weeks ago and changed their mind. Can they get their money back?",
    "kb-annual-refunds",
)

R(
    "kb-guests",
    "acme/support",
    "2025-03-12",
    "kb://acme/guests",
    "Guest accounts",
    "Guests see only the channels they are invited to and do not count toward the member limit of the plan.",
)
Q("q32", "alice", "Do outside contractors use up paid seats?", "kb-guests")

R(
    "kb-api-tokens",
    "acme",
    "2025-09-09",
    "kb://acme/api-tokens",
    "API tokens",
    "Tokens belong to one workspace and expire after 90 days unless created as service tokens, which never expire.",
)
Q(
    "q33",
    "alice",
    "Why would a customer's script suddenly start getting 401s after about three months?",
    "kb-api-tokens",
)

R(
    "kb-email-delivery",
    "acme/support",
    "2025-08-22",
    "kb://acme/missing-notification-emails",
    "Notification emails not arriving",
    "Ask the customer to allowlist notify.acme.io; corporate spam filters catch most missing notifications.",
)
Q("q34", "ben", "Customer says none of our alerts ever reach their inbox.", "kb-email-delivery")

R(
    "kb-retention",
    "acme",
    "2025-10-15",
    "kb://acme/message-retention",
    "Message retention",
    "Deleted messages can be restored for 30 days on Business and 90 days on Enterprise; after that they are "
    "purged for good.",
)
Q("q35", "alice", "A user trashed an important thread last week. Can it still be brought back?", "kb-retention")

R(
    "kb-sla-credits",
    "acme",
    "2025-02-01",
    "kb://acme/service-credits",
    "Service credits",
    "If monthly uptime drops below 99.9%, Enterprise customers can claim a 10% credit within 30 days of the incident.",
)
Q("q36", "ben", "After last week's outage, is any customer owed compensation?", "kb-sla-credits")

# Tier-specific playbooks: each tier keeps its own, the other tier cannot read them.
R(
    "t2-after-hours",
    "acme/support/tier2",
    "2025-09-01",
    "kb://acme/tier2/after-hours",
    "After-hours escalation",
    "Between 22:00 and 06:00 CET page the duty engineer through PagerDuty; do not call the engineering manager "
    "directly.",
)
R(
    "t1-after-hours",
    "acme/support/tier1",
    "2025-09-01",
    "kb://acme/tier1/after-hours",
    "After-hours escalation",
    "Between 22:00 and 06:00 CET hand the ticket to tier 2 and tell the customer to expect a reply in the morning.",
)
Q("q37", "alice", "It's midnight and a big customer is down. Who do I wake up?", "t2-after-hours")
Q("q38", "ben", "A ticket comes in late at night and I can't solve it. What do I do with it?", "t1-after-hours")

F(
    "t2-credit-limit",
    "acme/support/tier2",
    "2025-05-01",
    "team:support-tier2",
    "credit_authority",
    "may approve goodwill credits up to $500 without a manager",
)
F(
    "t1-credit-limit",
    "acme/support/tier1",
    "2025-05-01",
    "team:support-tier1",
    "credit_authority",
    "may approve goodwill credits up to $50; anything above goes to tier 2",
)
Q("q39", "alice", "What's the biggest goodwill gesture I can give a customer on my own?", "t2-credit-limit")
Q("q40", "ben", "How much account credit am I allowed to hand out without asking anyone?", "t1-credit-limit")

R(
    "t2-outage-macro",
    "acme/support/tier2",
    "2025-07-15",
    "kb://acme/tier2/outage-macro",
    "Outage reply macro",
    "Use macro #outage-ack: acknowledge the problem, link the status page, promise an update within 30 minutes.",
)
R(
    "t1-outage-macro",
    "acme/support/tier1",
    "2025-07-15",
    "kb://acme/tier1/outage-macro",
    "Outage reply macro",
    "Use macro #outage-ack: acknowledge the problem, link the status page, promise an update within 30 minutes.",
    role="sibling",
)
Q("q41", "alice", "What canned response do we send when the whole service is down?", "t2-outage-macro")

R(
    "t1-password-reset",
    "acme/support/tier1",
    "2025-03-20",
    "kb://acme/tier1/password-reset",
    "Password reset requests",
    "Send the self-service reset link; never set a password for a customer over the phone.",
)
Q(
    "q42",
    "ben",
    "Someone forgot how to log in. Can I just give them a new one while we're on the call?",
    "t1-password-reset",
)

# Background: the rest of the support org's memory.
F(
    "initech-region",
    "acme/support",
    "2025-02-01",
    "customer:initech",
    "data_region",
    "US-East (Virginia)",
    role="background",
)
F(
    "hooli-plan",
    "acme/support",
    "2025-05-05",
    "customer:hooli",
    "plan",
    "Enterprise Pro, which allows up to 2,000 members",
    role="near_miss",
)
F(
    "umbrella-plan",
    "acme/support",
    "2025-09-01",
    "customer:umbrella",
    "plan",
    "Enterprise, which allows up to 800 members",
    role="near_miss",
)
F(
    "tyrell-plan",
    "acme/support",
    "2025-08-01",
    "customer:tyrell",
    "plan",
    "Business, up to 150 members",
    role="background",
)
F(
    "wonka-plan",
    "acme/support",
    "2025-04-01",
    "customer:wonka",
    "plan",
    "Business, up to 150 members",
    role="background",
)
F(
    "stark-sso",
    "acme/support",
    "2025-09-30",
    "customer:stark",
    "sso_provider",
    "Azure AD over SAML; just-in-time provisioning is on",
    role="near_miss",
)
F(
    "umbrella-sso",
    "acme/support",
    "2025-09-01",
    "customer:umbrella",
    "sso_provider",
    "Google Workspace",
    role="background",
)
F("wonka-region", "acme/support", "2025-04-01", "customer:wonka", "data_region", "UK (London)", role="background")
F(
    "vandelay-plan",
    "acme/support",
    "2025-07-01",
    "customer:vandelay",
    "plan",
    "Team plan: 40 members, billed monthly",
    role="background",
)
F(
    "vandelay-domain",
    "acme/support",
    "2025-09-10",
    "customer:vandelay",
    "primary_domain",
    "vandelay-industries.com; users of the old vandelay.net domain were migrated",
    role="background",
)
F(
    "soylent-plan",
    "acme/support",
    "2025-06-15",
    "customer:soylent",
    "plan",
    "Business, up to 150 members",
    role="background",
)
F(
    "cyberdyne-plan",
    "acme/support",
    "2025-10-01",
    "customer:cyberdyne",
    "plan",
    "Enterprise Pro, which allows up to 500 members",
    role="near_miss",
)
F(
    "piedpiper-contact",
    "acme/support",
    "2025-11-11",
    "customer:pied-piper",
    "technical_contact",
    "Gilfoyle, who prefers issues filed in their shared Slack channel",
    role="background",
)
F(
    "dunder-plan",
    "acme/support",
    "2025-03-01",
    "customer:dunder-mifflin",
    "plan",
    "Team plan: 30 members",
    role="background",
)
F("stark-region", "acme/support", "2025-09-30", "customer:stark", "data_region", "US-West (Oregon)", role="background")
F(
    "globex-billing",
    "acme/support",
    "2025-11-03",
    "customer:globex",
    "billing_cycle",
    "annual, paid by wire transfer",
    role="background",
)
F(
    "hooli-billing",
    "acme/support",
    "2025-05-05",
    "customer:hooli",
    "billing_cycle",
    "quarterly, card on file",
    role="background",
)
P(
    "tyrell-contact",
    "acme/support",
    "2025-10-02",
    "customer:tyrell",
    "contact_channel",
    "phone for anything urgent, email otherwise",
    role="background",
)
P(
    "stark-contact",
    "acme/support",
    "2025-12-20",
    "customer:stark",
    "contact_channel",
    "only through their account manager, never directly to end users",
    role="background",
)
P(
    "dunder-contact",
    "acme/support",
    "2025-10-01",
    "customer:dunder-mifflin",
    "contact_channel",
    "phone calls are fine during Scranton business hours",
    role="near_miss",
)
R(
    "kb-storage-plans",
    "acme",
    "2025-01-15",
    "kb://acme/storage-per-plan",
    "Storage per plan",
    "Business includes 1 TB per workspace and Enterprise 5 TB; more can be bought in 500 GB blocks.",
    role="near_miss",
)
R(
    "kb-mobile-offline",
    "acme",
    "2025-06-06",
    "kb://acme/mobile-offline",
    "Using the mobile app offline",
    "Recently opened documents are cached on the device; edits sync when it reconnects.",
    role="background",
)
R(
    "kb-shortcuts",
    "acme",
    "2025-02-14",
    "kb://acme/keyboard-shortcuts",
    "Keyboard shortcuts",
    "Press ? anywhere to see every shortcut; Ctrl+K opens the quick switcher.",
    role="background",
)
R(
    "kb-calendar",
    "acme",
    "2025-08-08",
    "kb://acme/calendar-sync",
    "Calendar integration",
    "Google and Outlook calendars sync every 15 minutes; events older than a year are not imported.",
    role="background",
)
R(
    "kb-audit-log",
    "acme",
    "2025-03-30",
    "kb://acme/audit-log",
    "The audit log",
    "Enterprise admins can export a year of audit events as CSV from Admin > Audit.",
    role="background",
)
R(
    "kb-domain-verify",
    "acme/support",
    "2025-07-19",
    "kb://acme/domain-verification",
    "Verifying a domain",
    "Add the TXT record we show in Admin > Domains; verification can take up to 48 hours.",
    role="background",
)
R(
    "kb-invite-members",
    "acme/support",
    "2025-04-04",
    "kb://acme/invite-members",
    "Inviting people",
    "Admins invite people by email or share a join link; a workspace stops accepting invites at its member limit.",
    role="near_miss",
)
R(
    "kb-browser-support",
    "acme",
    "2025-01-10",
    "kb://acme/supported-browsers",
    "Supported browsers",
    "The last two versions of Chrome, Firefox, Safari and Edge; Internet Explorer is not supported.",
    role="background",
)
R(
    "kb-data-residency",
    "acme",
    "2025-01-20",
    "kb://acme/data-residency",
    "Choosing a data region",
    "A workspace's region is chosen at signup (US, EU or UK) and can only be moved by a paid migration.",
    role="near_miss",
)
R(
    "kb-billing-invoices",
    "acme/support",
    "2025-02-20",
    "kb://acme/invoices",
    "Finding invoices",
    "Owners download past invoices from Settings > Billing; a purchase order number can be added to future ones.",
    role="near_miss",
)
R(
    "t2-refund-process",
    "acme/support/tier2",
    "2025-05-01",
    "kb://acme/tier2/refund-process",
    "Issuing a refund",
    "Refunds above the credit limit need a Zendesk approval from the support manager.",
    role="background",
)
R(
    "t1-triage",
    "acme/support/tier1",
    "2025-03-20",
    "kb://acme/tier1/triage",
    "Triage checklist",
    "Confirm the workspace, reproduce the issue, tag the product area, then route.",
    role="background",
)
P(
    "alice-hours",
    "acme/support/tier2/alice",
    "2026-01-12",
    "agent:alice",
    "working_hours",
    "08:00-16:00 CET, Monday to Thursday",
    role="background",
    source="user_explicit",
)
P(
    "bob-hours",
    "acme/support/tier2/bob",
    "2026-01-12",
    "agent:bob",
    "working_hours",
    "12:00-20:00 CET",
    role="sibling",
    source="user_explicit",
)

# -------------------------------------------------------------------------- acme SRE
# Episodes, runbooks and service facts of the on-call team; the platform team is its sibling.

E(
    "ep-auth-rollback",
    "acme/sre/oncall",
    "2026-01-14",
    "auth-gateway",
    "login p99 latency above 4 s right after a deploy",
    "rolled back to the previous release and flushed the session cache",
    "fixed",
    "https://incidents.acme.example/INC-2291",
)
E(
    "ep-auth-rollback-platform",
    "acme/sre/platform",
    "2026-01-14",
    "auth-gateway",
    "login p99 latency above 4 s right after a deploy",
    "raised the pod memory limits",
    "fixed",
    "https://incidents.acme.example/INC-2291",
    role="sibling",
    env="staging",
)
E(
    "ep-auth-logo",
    "acme/sre/oncall",
    "2025-12-03",
    "auth-gateway",
    "sign-in page showed the old logo after a release",
    "purged the CDN cache",
    "fixed",
    "https://incidents.acme.example/INC-2262",
    role="near_miss",
)
Q(
    "q43",
    "dana",
    "Sign-ins got really slow right after we shipped. What got us out of it last time?",
    "ep-auth-rollback",
)

E(
    "ep-search-lag",
    "acme/sre/oncall",
    "2026-02-03",
    "search-indexer",
    "indexing lag keeps growing; new documents are not searchable for hours",
    "doubled the consumer pool and replayed the dead-letter queue",
    "fixed",
    "https://incidents.acme.example/INC-2317",
)
Q("q44", "dana", "People can't find files they uploaded this morning. Have we seen this before?", "ep-search-lag")

E(
    "ep-push-delay",
    "acme/sre/oncall",
    "2025-11-20",
    "notifications",
    "push notifications delayed by more than 20 minutes on iOS",
    "renewed the expired APNs certificate",
    "fixed",
    "https://incidents.acme.example/INC-2203",
)
E(
    "ep-email-digest",
    "acme/sre/oncall",
    "2025-12-18",
    "notifications",
    "email digests arriving hours late",
    "scaled out the mail relay workers",
    "fixed",
    "https://incidents.acme.example/INC-2255",
    role="near_miss",
)
Q("q45", "dana", "iPhone users aren't getting their alerts on time.", "ep-push-delay")

E(
    "ep-double-invoices",
    "acme/sre",
    "2025-12-01",
    "billing-worker",
    "duplicate invoices generated for about 300 accounts",
    "disabled the retry cron and voided the duplicates with the admin tool",
    "fixed",
    "https://incidents.acme.example/INC-2240",
)
Q("q46", "dana", "Some accounts got charged twice this month. How did we clean that up before?", "ep-double-invoices")

E(
    "ep-upload-507",
    "acme/sre/oncall",
    "2026-01-22",
    "file-store",
    "large uploads failing with HTTP 507",
    "expanded the storage volume and lowered the multipart chunk size",
    "fixed",
    "https://incidents.acme.example/INC-2288",
)
Q("q47", "dana", "Big attachments bounce with an 'insufficient storage' error.", "ep-upload-507")

E(
    "ep-ws-timeout",
    "acme/sre/oncall",
    "2025-10-05",
    "websocket-hub",
    "clients disconnected every 60 seconds",
    "raised the load balancer idle timeout from 60 s to 300 s",
    "fixed",
    "https://incidents.acme.example/INC-2150",
)
E(
    "ep-ws-timeout-platform",
    "acme/sre/platform",
    "2025-10-05",
    "websocket-hub",
    "clients disconnected every 60 seconds",
    "raised the load balancer idle timeout from 60 s to 300 s",
    "fixed",
    "https://incidents.acme.example/INC-2150",
    role="sibling",
)
Q("q48", "dana", "Live co-editing keeps kicking people out about once a minute.", "ep-ws-timeout")

E(
    "ep-tenant-flood",
    "acme/sre/oncall",
    "2026-02-10",
    "api-gateway",
    "5xx spike caused by one tenant flooding the API",
    "applied a per-tenant rate limit override",
    "fixed",
    "https://incidents.acme.example/INC-2330",
)
Q("q49", "dana", "A single customer is hammering us and everybody else is seeing errors.", "ep-tenant-flood")

E(
    "ep-sync-restart",
    "acme/sre/oncall",
    "2026-02-20",
    "sync-service",
    "desktop clients stuck on 'syncing' indefinitely",
    "restarted the sync workers",
    "failed",
    "https://incidents.acme.example/INC-2341",
    role="near_miss",
)
E(
    "ep-sync-cursor",
    "acme/sre/oncall",
    "2026-02-21",
    "sync-service",
    "desktop clients stuck on 'syncing' indefinitely",
    "cleared the corrupted cursor table for the affected workspaces",
    "fixed",
    "https://incidents.acme.example/INC-2341",
)
Q("q50", "dana", "The desktop app spins forever and never finishes. What actually fixed it?", "ep-sync-cursor")

R(
    "rb-db-failover",
    "acme/sre",
    "2025-08-08",
    "runbook://acme/db-failover",
    "Failing over the primary database",
    "Promote the replica with pgctl promote, then update the connection-string secret; expect two to three minutes "
    "of read-only mode.",
    source="runbooks@v7",
)
Q("q51", "dana", "The main Postgres box is dead. How do we switch to the standby?", "rb-db-failover")

R(
    "rb-page-escalation",
    "acme/sre",
    "2025-06-01",
    "runbook://acme/page-escalation",
    "Escalating an unacknowledged page",
    "If the primary on-call has not acknowledged within 15 minutes, page the secondary, then the engineering manager.",
    source="runbooks@v7",
)
R(
    "rb-page-escalation-old",
    "acme/sre",
    "2025-01-10",
    "runbook://acme/page-escalation",
    "Escalating an unacknowledged page",
    "If the primary on-call has not acknowledged within 30 minutes, page the secondary.",
    role="superseded",
    source="runbooks@v6",
)
Q("q52", "dana", "Nobody picked up the alert. How long do I wait before calling someone else?", "rb-page-escalation")

R(
    "rb-status-page",
    "acme/sre",
    "2025-04-04",
    "runbook://acme/status-page",
    "Public status page updates",
    "Post the first update within 10 minutes of declaring an incident and then every 30 minutes until resolved.",
    source="runbooks@v7",
)
Q("q53", "dana", "How often do customers need to hear from us during a major outage?", "rb-status-page")

R(
    "rb-kill-switch",
    "acme/sre",
    "2025-09-19",
    "runbook://acme/kill-switch",
    "Turning a feature off in production",
    "Flip its flag off in LaunchControl; the change reaches all clients within a minute and needs no deploy.",
    source="runbooks@v7",
)
Q("q54", "dana", "Is there a way to disable the new editor without shipping code?", "rb-kill-switch")

F(
    "svc-auth-owner",
    "acme/sre",
    "2025-09-01",
    "service:auth-gateway",
    "owner",
    "the identity team, Slack channel #team-identity",
    source="service-catalog@v2",
)
Q("q55", "dana", "Which group do I ping about problems with the login service?", "svc-auth-owner")

F(
    "svc-search-version",
    "acme/sre/oncall",
    "2026-02-01",
    "service:search-indexer",
    "deployed_version",
    "v3.8.2",
    source="deploy-bot@v1",
)
F(
    "svc-search-version-old",
    "acme/sre/oncall",
    "2025-12-01",
    "service:search-indexer",
    "deployed_version",
    "v3.7.0",
    role="superseded",
    source="deploy-bot@v1",
)
F(
    "svc-search-version-platform",
    "acme/sre/platform",
    "2026-02-15",
    "service:search-indexer",
    "deployed_version",
    "v3.9.0-rc1 (canary)",
    role="sibling",
    source="deploy-bot@v1",
)
Q("q56", "dana", "Which build of the indexer is live in production right now?", "svc-search-version")

F(
    "svc-billing-freeze",
    "acme/sre",
    "2025-06-01",
    "service:billing-worker",
    "deploy_freeze",
    "no deploys from the 28th through the 2nd of each month (month-end invoicing)",
    source="service-catalog@v2",
)
Q("q57", "dana", "Can I push a change to invoicing on the last day of the month?", "svc-billing-freeze")

F(
    "svc-backups",
    "acme/sre",
    "2025-08-01",
    "service:file-store",
    "backup_schedule",
    "snapshots every 6 hours, kept for 35 days",
    source="service-catalog@v2",
)
F(
    "svc-backups-old",
    "acme/sre",
    "2025-01-01",
    "service:file-store",
    "backup_schedule",
    "daily snapshots, kept for 14 days",
    role="superseded",
    source="service-catalog@v2",
)
Q("q58", "dana", "If a bucket gets wiped, how far back can we restore?", "svc-backups")

F(
    "oncall-rotation",
    "acme/sre/oncall",
    "2026-02-23",
    "team:oncall",
    "primary_this_week",
    "Dana Kim, with Luis Ortega as secondary",
    source="pagerduty-sync@v1",
)
F(
    "oncall-rotation-old",
    "acme/sre/oncall",
    "2026-02-16",
    "team:oncall",
    "primary_this_week",
    "Luis Ortega, with Mei Lin as secondary",
    role="superseded",
    source="pagerduty-sync@v1",
)
Q("q59", "dana", "Who's carrying the pager this week?", "oncall-rotation")

P(
    "dana-paging",
    "acme/sre/oncall/dana",
    "2026-01-03",
    "agent:dana",
    "paging_channel",
    "phone call for sev1, Slack DM for everything else",
    source="user_explicit",
)
Q("q60", "dana", "How do I want to be notified about incidents?", "dana-paging")

# Background: more of the SRE team's memory, and the platform team's (out of dana's scope).
E(
    "ep-redis-evictions",
    "acme/sre/oncall",
    "2026-01-30",
    "session-store",
    "Redis evicting keys under memory pressure",
    "raised maxmemory and switched the policy to allkeys-lru",
    "fixed",
    "https://incidents.acme.example/INC-2301",
    role="background",
)
E(
    "ep-cert-expiry",
    "acme/sre/oncall",
    "2025-12-27",
    "api-gateway",
    "TLS certificate expired on api.acme.io",
    "renewed it by hand and fixed the cert-manager cron",
    "fixed",
    "https://incidents.acme.example/INC-2270",
    role="background",
)
E(
    "ep-dns-propagation",
    "acme/sre/oncall",
    "2026-01-08",
    "edge",
    "custom domains failing to resolve after a DNS change",
    "lowered the TTL and waited for propagation",
    "inconclusive",
    "https://incidents.acme.example/INC-2280",
    role="background",
)
E(
    "ep-queue-backlog",
    "acme/sre/oncall",
    "2026-02-14",
    "notifications",
    "webhook queue backlog above 1 million",
    "paused retries for one failing customer endpoint",
    "fixed",
    "https://incidents.acme.example/INC-2334",
    role="background",
)
E(
    "ep-disk-full",
    "acme/sre/platform",
    "2026-02-01",
    "log-shipper",
    "log volume filled the disk on ingest nodes",
    "added a retention cap of 3 days",
    "fixed",
    "https://incidents.acme.example/INC-2312",
    role="sibling",
)
E(
    "ep-k8s-upgrade",
    "acme/sre/platform",
    "2026-02-18",
    "cluster",
    "pods stuck in pending after the node pool upgrade",
    "cordoned the old pool and drained it manually",
    "fixed",
    "https://incidents.acme.example/INC-2338",
    role="sibling",
)
R(
    "rb-postmortem",
    "acme/sre",
    "2025-03-03",
    "runbook://acme/postmortems",
    "Writing a postmortem",
    "Every sev1 or sev2 gets a blameless postmortem within five working days.",
    role="background",
    source="runbooks@v7",
)
R(
    "rb-sev-levels",
    "acme/sre",
    "2025-03-03",
    "runbook://acme/severity-levels",
    "Severity levels",
    "Sev1: all customers affected; sev2: a major feature down; sev3: degraded for some customers.",
    role="background",
    source="runbooks@v7",
)
R(
    "rb-deploy",
    "acme/sre",
    "2025-05-12",
    "runbook://acme/deploys",
    "Deploying to production",
    "Merge to main, wait for the canary to stay green for 20 minutes, then promote.",
    role="near_miss",
    source="runbooks@v7",
)
R(
    "rb-rollback",
    "acme/sre",
    "2025-05-12",
    "runbook://acme/rollbacks",
    "Rolling back a release",
    "Run deployctl rollback with the previous tag; migrations are forward-only, so check them first.",
    role="near_miss",
    source="runbooks@v7",
)
R(
    "rb-platform-capacity",
    "acme/sre/platform",
    "2025-11-01",
    "runbook://acme/platform/capacity",
    "Capacity planning",
    "Keep every node pool under 70% CPU at peak; request quota a month ahead.",
    role="sibling",
    source="runbooks@v7",
)
F(
    "svc-search-owner",
    "acme/sre",
    "2025-09-01",
    "service:search-indexer",
    "owner",
    "the discovery team, Slack channel #team-discovery",
    role="near_miss",
    source="service-catalog@v2",
)
F(
    "svc-file-owner",
    "acme/sre",
    "2025-09-01",
    "service:file-store",
    "owner",
    "the storage team, Slack channel #team-storage",
    role="background",
    source="service-catalog@v2",
)
F(
    "svc-auth-version",
    "acme/sre/oncall",
    "2026-01-15",
    "service:auth-gateway",
    "deployed_version",
    "v5.2.4",
    role="near_miss",
    source="deploy-bot@v1",
)
F(
    "svc-sync-slo",
    "acme/sre",
    "2025-07-01",
    "service:sync-service",
    "slo",
    "99.5% of changes reach other devices within 10 seconds",
    role="background",
    source="service-catalog@v2",
)
F(
    "svc-db-replicas",
    "acme/sre",
    "2025-08-08",
    "service:postgres-main",
    "topology",
    "one primary in eu-central-1a, a synchronous standby in 1b and an async replica in us-east-1",
    role="near_miss",
    source="service-catalog@v2",
)

# ============================================================================ northwind
# Store policy (as published references), shared by the whole commerce division or one team.

R(
    "nw-return-window",
    "northwind/commerce",
    "2025-09-01",
    "policy://northwind/return-window",
    "Return window",
    "Most items can be returned within 30 days of delivery; electronics within 15 days.",
    source="policy-site@v3",
)
R(
    "nw-return-window-old",
    "northwind/commerce",
    "2025-01-01",
    "policy://northwind/return-window",
    "Return window",
    "Most items can be returned within 60 days of delivery; electronics within 30 days.",
    role="superseded",
    source="policy-site@v3",
)
Q(
    "q61",
    "omar",
    "A shopper got a sweater three weeks ago and wants to send it back. Still allowed?",
    "nw-return-window",
)

R(
    "nw-damaged",
    "northwind/commerce/returns",
    "2025-06-10",
    "policy://northwind/returns/damaged-on-arrival",
    "Damaged on arrival",
    "Ask for a photo, then ship a replacement right away without waiting for the broken item to come back.",
    source="policy-site@v3",
)
R(
    "nw-damaged-payments",
    "northwind/commerce/payments",
    "2025-06-10",
    "policy://northwind/payments/damaged-on-arrival",
    "Damaged on arrival",
    "Refund damaged orders to the original payment method once the returns team confirms.",
    role="sibling",
    source="policy-site@v3",
)
Q("q62", "omar", "The parcel showed up smashed. Do we need it back before sending a new one?", "nw-damaged")

R(
    "nw-restocking",
    "northwind/commerce",
    "2025-06-10",
    "policy://northwind/restocking-fee",
    "Restocking fee",
    "Opened electronics returned in working order carry a 15% restocking fee.",
    source="policy-site@v3",
)
Q(
    "q63",
    "omar",
    "Will the buyer be charged anything for sending back an opened laptop that works fine?",
    "nw-restocking",
)

R(
    "nw-final-sale",
    "northwind/commerce",
    "2025-03-03",
    "policy://northwind/final-sale",
    "Final sale items",
    "Clearance items, gift cards and personalised products cannot be returned or exchanged.",
    source="policy-site@v3",
)
Q("q64", "omar", "Can someone bring back a towel we monogrammed for them?", "nw-final-sale")

R(
    "nw-return-shipping",
    "northwind/commerce/returns",
    "2025-10-01",
    "policy://northwind/returns/return-shipping",
    "Return shipping costs",
    "Northwind Plus members get free return labels; everyone else pays $6.95, taken off the refund.",
    source="policy-site@v3",
)
R(
    "nw-return-shipping-old",
    "northwind/commerce/returns",
    "2025-02-01",
    "policy://northwind/returns/return-shipping",
    "Return shipping costs",
    "Return labels are free for every customer.",
    role="superseded",
    source="policy-site@v3",
)
Q("q65", "omar", "Who covers postage when a regular customer mails something back?", "nw-return-shipping")

R(
    "nw-refund-timing",
    "northwind/commerce/returns",
    "2025-08-15",
    "policy://northwind/returns/refund-timing",
    "When refunds are issued",
    "Refunds go out within 2 business days of the warehouse scanning the parcel; the bank may take 3-5 more days.",
    source="policy-site@v3",
)
R(
    "nw-refund-timing-payments",
    "northwind/commerce/payments",
    "2025-08-15",
    "policy://northwind/payments/refund-timing",
    "When refunds are issued",
    "Refunds go out within 2 business days of the warehouse scanning the parcel; the bank may take 3-5 more days.",
    role="sibling",
    source="policy-site@v3",
)
Q("q66", "omar", "A shopper posted their package last week and is asking where their money is.", "nw-refund-timing")

R(
    "nw-exchanges",
    "northwind/commerce/returns",
    "2025-05-05",
    "policy://northwind/returns/exchanges",
    "Size exchanges",
    "Exchanges for a different size ship as soon as the return label is scanned, before the original arrives.",
    source="policy-site@v3",
)
Q(
    "q67",
    "omar",
    "Customer ordered shoes a size too small. Do they have to wait until we get the first pair?",
    "nw-exchanges",
)

R(
    "nw-international",
    "northwind/commerce",
    "2025-07-07",
    "policy://northwind/international-returns",
    "International returns",
    "Orders shipped outside the US are refunded minus the original shipping; customs duties are not refundable.",
    source="policy-site@v3",
)
Q("q68", "omar", "A buyer in Germany wants their import taxes back along with the refund.", "nw-international")

R(
    "nw-chargeback",
    "northwind/commerce/payments",
    "2025-04-20",
    "policy://northwind/payments/chargebacks",
    "Chargebacks",
    "Never refund an order that has an open chargeback; upload evidence in the processor portal within 7 days.",
    source="policy-site@v3",
)
R(
    "nw-chargeback-returns",
    "northwind/commerce/returns",
    "2025-04-20",
    "policy://northwind/returns/chargeback-handoff",
    "Chargebacks",
    "If a customer says they filed a chargeback, stop the return and hand the ticket to the payments team.",
    source="policy-site@v3",
)
Q(
    "q69",
    "pia",
    "The cardholder's bank is disputing an order. Should I just give them their money back?",
    "nw-chargeback",
)
Q(
    "q70",
    "omar",
    "The customer says they already complained to their bank about the charge. What now?",
    "nw-chargeback-returns",
)

R(
    "nw-risk-hold",
    "northwind/commerce/payments",
    "2025-11-11",
    "policy://northwind/payments/risk-hold",
    "Orders on risk hold",
    "Orders flagged by the risk engine stay on hold for up to 24 hours; never release one early because the "
    "customer insists.",
    source="policy-site@v3",
)
Q(
    "q71",
    "pia",
    "A customer is pushing hard for us to ship an order the system flagged. Can I let it through?",
    "nw-risk-hold",
)

R(
    "nw-payment-methods",
    "northwind/commerce",
    "2025-01-20",
    "policy://northwind/payment-methods",
    "Accepted payment methods",
    "Visa, Mastercard, Amex, PayPal and Apple Pay; no cheques, no crypto, no cash on delivery.",
    source="policy-site@v3",
)
R(
    "nw-payment-methods-old",
    "northwind/commerce",
    "2024-06-01",
    "policy://northwind/payment-methods",
    "Accepted payment methods",
    "Visa, Mastercard and PayPal; cheques accepted for business accounts.",
    role="superseded",
    source="policy-site@v3",
)
Q("q72", "pia", "Can a shopper pay with bitcoin?", "nw-payment-methods")

# Customers and orders.
F(
    "c20417-tier",
    "northwind/commerce",
    "2025-05-01",
    "customer:C-20417",
    "loyalty_tier",
    "Northwind Plus member since May 2025",
    source="shop-db@v9",
)
F(
    "c20417-tier-old",
    "northwind/commerce",
    "2024-03-01",
    "customer:C-20417",
    "loyalty_tier",
    "regular customer, no membership",
    role="superseded",
    source="shop-db@v9",
)
Q("q73", "omar", "Is shopper C-20417 on the paid membership?", "c20417-tier")

P(
    "c20417-contact",
    "northwind/commerce",
    "2025-12-10",
    "customer:C-20417",
    "contact_channel",
    "text messages rather than email",
)
Q("q74", "omar", "What's the best way to reach shopper C-20417?", "c20417-contact")

F(
    "nw88213-delivery",
    "northwind/commerce",
    "2026-02-11",
    "order:NW-88213",
    "delivery_status",
    "delivered on 11 Feb and signed for at the front desk",
    source="carrier-webhook@v2",
)
F(
    "nw88213-delivery-ofd",
    "northwind/commerce",
    "2026-02-10",
    "order:NW-88213",
    "delivery_status",
    "out for delivery",
    role="superseded",
    source="carrier-webhook@v2",
)
F(
    "nw88213-delivery-shipped",
    "northwind/commerce",
    "2026-02-08",
    "order:NW-88213",
    "delivery_status",
    "shipped with UPS",
    role="superseded",
    source="carrier-webhook@v2",
)
Q("q75", "omar", "Did order NW-88213 actually reach the buyer?", "nw88213-delivery")

F(
    "nw77120-refund",
    "northwind/commerce/payments",
    "2026-02-20",
    "order:NW-77120",
    "refund_status",
    "$129.00 refunded to the original card on 20 Feb",
    source="shop-db@v9",
)
F(
    "nw77120-refund-old",
    "northwind/commerce/payments",
    "2026-02-18",
    "order:NW-77120",
    "refund_status",
    "return received at the warehouse, refund pending inspection",
    role="superseded",
    source="shop-db@v9",
)
F(
    "nw77120-return",
    "northwind/commerce/returns",
    "2026-02-18",
    "order:NW-77120",
    "return_status",
    "parcel received on 18 Feb and passed inspection",
    source="warehouse-scan@v4",
)
Q("q76", "pia", "Has the money for NW-77120 gone back to the customer yet?", "nw77120-refund")
Q("q77", "omar", "Did we get NW-77120's package back, and was it okay?", "nw77120-return")

F(
    "c51007-risk",
    "northwind/commerce",
    "2025-11-02",
    "customer:C-51007",
    "risk_flag",
    "two chargebacks in 2025: manual review required before any refund over $200",
    source="risk-engine@v3",
)
Q("q78", "pia", "Anything I should check before sending C-51007 $450?", "c51007-risk")

P("c66230-language", "northwind/commerce", "2026-01-02", "customer:C-66230", "language", "French")
Q("q79", "omar", "Should I write to C-66230 in English?", "c66230-language")

F(
    "c33810-address",
    "northwind/commerce/returns",
    "2025-09-25",
    "customer:C-33810",
    "shipping_address",
    "a freight forwarder in Miami; exchanges cannot be sent there",
    source="shop-db@v9",
)
Q("q80", "omar", "Can we mail a replacement size to C-33810?", "c33810-address")

# Incidents on the shop's systems.
E(
    "ep-ca-labels",
    "northwind/commerce/returns",
    "2026-01-28",
    "returns-portal",
    "return label generation failing for Canadian addresses",
    "switched the Canada carrier to Canada Post in the label service config",
    "fixed",
    "https://jira.northwind.example/RET-812",
)
Q("q81", "omar", "Shoppers in Toronto can't print anything to ship their items back.", "ep-ca-labels")

E(
    "ep-applepay",
    "northwind/commerce/payments",
    "2026-02-05",
    "payments-api",
    "Apple Pay payments declined at checkout",
    "renewed the expired merchant identity certificate",
    "fixed",
    "https://jira.northwind.example/PAY-431",
)
Q("q82", "pia", "Customers paying with their phone wallet get rejected at the last step.", "ep-applepay")

E(
    "ep-refunds-stuck",
    "northwind/commerce/payments",
    "2026-02-12",
    "payments-api",
    "refunds stuck in 'pending' for more than a day",
    "re-queued the refund batch after the processor's API key was rotated",
    "fixed",
    "https://jira.northwind.example/PAY-440",
)
Q(
    "q83",
    "pia",
    "Money owed to customers hasn't gone out in over 24 hours. What was the fix last time?",
    "ep-refunds-stuck",
)

# Background: the rest of the shop's memory.
R(
    "nw-price-match",
    "northwind/commerce",
    "2025-04-01",
    "policy://northwind/price-match",
    "Price match",
    "We match a lower price from a listed competitor within 14 days of purchase, once per order.",
    role="background",
    source="policy-site@v3",
)
R(
    "nw-gift-wrap",
    "northwind/commerce",
    "2025-10-20",
    "policy://northwind/gift-wrap",
    "Gift wrapping",
    "Gift wrap costs $4.99 per item and is not refundable.",
    role="background",
    source="policy-site@v3",
)
R(
    "nw-warranty",
    "northwind/commerce",
    "2025-02-11",
    "policy://northwind/warranty",
    "Manufacturer warranty",
    "Faults after the return window go to the manufacturer's warranty; we help file the claim.",
    role="near_miss",
    source="policy-site@v3",
)
R(
    "nw-lost-parcel",
    "northwind/commerce/returns",
    "2025-08-01",
    "policy://northwind/returns/lost-parcel",
    "Lost return parcels",
    "If tracking shows no movement for 10 days, open a carrier claim and refund the customer.",
    role="near_miss",
    source="policy-site@v3",
)
R(
    "nw-receipt",
    "northwind/commerce/returns",
    "2025-05-05",
    "policy://northwind/returns/no-receipt",
    "Returns without an order number",
    "Look the order up by email or card; without either, offer store credit only.",
    role="background",
    source="policy-site@v3",
)
R(
    "nw-partial-refund",
    "northwind/commerce/payments",
    "2025-09-09",
    "policy://northwind/payments/partial-refunds",
    "Partial refunds",
    "Partial refunds over $100 need a second approver in the payments team.",
    role="background",
    source="policy-site@v3",
)
R(
    "nw-currency",
    "northwind/commerce/payments",
    "2025-03-15",
    "policy://northwind/payments/currency",
    "Charging in local currency",
    "Customers in Canada and the UK are charged in CAD and GBP; refunds use the same rate.",
    role="background",
    source="policy-site@v3",
)
R(
    "nw-store-credit",
    "northwind/commerce",
    "2025-06-01",
    "policy://northwind/store-credit",
    "Store credit",
    "Store credit never expires and can be combined with one promo code.",
    role="near_miss",
    source="policy-site@v3",
)
R(
    "nw-shipping-times",
    "northwind/commerce",
    "2025-01-05",
    "policy://northwind/shipping-times",
    "Delivery times",
    "Standard delivery takes 3-5 business days in the US; express arrives next day if ordered before 2pm.",
    role="near_miss",
    source="policy-site@v3",
)
F(
    "c20417-address",
    "northwind/commerce",
    "2025-05-01",
    "customer:C-20417",
    "shipping_address",
    "a house in Portland, Oregon",
    role="near_miss",
    source="shop-db@v9",
)
F(
    "c51007-tier",
    "northwind/commerce",
    "2025-03-01",
    "customer:C-51007",
    "loyalty_tier",
    "regular customer, no membership",
    role="near_miss",
    source="shop-db@v9",
)
F(
    "c66230-tier",
    "northwind/commerce",
    "2025-09-01",
    "customer:C-66230",
    "loyalty_tier",
    "Northwind Plus member since September 2025",
    role="near_miss",
    source="shop-db@v9",
)
F(
    "c33810-tier",
    "northwind/commerce",
    "2025-09-25",
    "customer:C-33810",
    "loyalty_tier",
    "regular customer, no membership",
    role="background",
    source="shop-db@v9",
)
F(
    "nw90114-delivery",
    "northwind/commerce",
    "2026-02-26",
    "order:NW-90114",
    "delivery_status",
    "delayed at the Memphis hub, new estimate 4 March",
    role="near_miss",
    source="carrier-webhook@v2",
)
F(
    "nw81502-delivery",
    "northwind/commerce",
    "2026-02-19",
    "order:NW-81502",
    "delivery_status",
    "returned to sender: address not found",
    role="near_miss",
    source="carrier-webhook@v2",
)
F(
    "nw77120-items",
    "northwind/commerce",
    "2026-02-02",
    "order:NW-77120",
    "items",
    "one pair of trail running shoes, size 42",
    role="background",
    source="shop-db@v9",
)
F(
    "nw88213-items",
    "northwind/commerce",
    "2026-02-07",
    "order:NW-88213",
    "items",
    "a 55-inch television",
    role="background",
    source="shop-db@v9",
)
P(
    "c51007-contact",
    "northwind/commerce",
    "2025-11-02",
    "customer:C-51007",
    "contact_channel",
    "email only",
    role="background",
)
P("c33810-language", "northwind/commerce", "2025-09-25", "customer:C-33810", "language", "Portuguese", role="near_miss")
E(
    "ep-returns-login",
    "northwind/commerce/returns",
    "2025-12-12",
    "returns-portal",
    "customers logged out when uploading photos",
    "raised the session size limit",
    "fixed",
    "https://jira.northwind.example/RET-790",
    role="background",
)
E(
    "ep-label-printer",
    "northwind/commerce/returns",
    "2026-02-24",
    "warehouse-labels",
    "warehouse printers producing blank return labels",
    "swapped the thermal ribbon stock",
    "fixed",
    "https://jira.northwind.example/RET-840",
    role="near_miss",
)
E(
    "ep-3ds-timeout",
    "northwind/commerce/payments",
    "2026-01-17",
    "payments-api",
    "3-D Secure challenges timing out for European cards",
    "raised the challenge timeout to 10 minutes",
    "fixed",
    "https://jira.northwind.example/PAY-420",
    role="background",
)
E(
    "ep-double-refund",
    "northwind/commerce/payments",
    "2026-02-27",
    "payments-api",
    "a refund issued twice after a retry",
    "added an idempotency key to refund requests",
    "fixed",
    "https://jira.northwind.example/PAY-447",
    role="near_miss",
)
E(
    "ep-refund-retry-failed",
    "northwind/commerce/payments",
    "2026-02-12",
    "payments-api",
    "refunds stuck in 'pending' for more than a day",
    "retried the batch without changing anything",
    "failed",
    "https://jira.northwind.example/PAY-440",
    role="near_miss",
)
E(
    "ep-warehouse-scan",
    "northwind/commerce/returns",
    "2026-02-03",
    "warehouse-labels",
    "returned parcels not marked as received after scanning",
    "re-synced the scanner firmware",
    "fixed",
    "https://jira.northwind.example/RET-821",
    role="near_miss",
)
E(
    "ep-payments-ca",
    "northwind/commerce/returns",
    "2026-01-05",
    "returns-portal",
    "Canadian customers refunded in USD instead of CAD",
    "escalated to payments",
    "inconclusive",
    "https://jira.northwind.example/RET-801",
    role="background",
)


# ======================================================================= batch 2
# Written after the fusion weight had been chosen on batch 1's dev split and before any
# ranking was run on these queries. More memories per subject: a named customer, order or
# service has several memories its asker can read, so the name alone does not pick the answer.

CURRENT_BATCH = 2

# ====== batch 2: acme support, customer accounts

F(
    "tyrell-hold",
    "acme/support",
    "2026-01-19",
    "customer:tyrell",
    "legal_hold",
    "the Nexus research workspace has been under a litigation hold since 19 January 2026: nothing in it may be "
    "deleted or purged, even if their own admin asks",
)
F("tyrell-hold-old", "acme/support", "2025-08-01", "customer:tyrell", "legal_hold", "none", role="superseded")
F(
    "tyrell-retention",
    "acme/support",
    "2025-08-01",
    "customer:tyrell",
    "retention_setting",
    "keep everything forever; automatic clean-up is switched off in all their workspaces",
    role="near_miss",
)
Q("q84", "alice", "Tyrell wants last year's conversations in the Nexus space wiped. Can we go ahead?", "tyrell-hold")

F(
    "globex-url",
    "acme/support",
    "2025-12-08",
    "customer:globex",
    "workspace_url",
    "collab.globex.com, a custom domain; old globex.acme.io links still redirect there",
)
F(
    "globex-url-old",
    "acme/support",
    "2025-03-01",
    "customer:globex",
    "workspace_url",
    "globex.acme.io",
    role="superseded",
)
Q("q85", "ben", "Where do Globex staff go in their browser to get to our app?", "globex-url")

F(
    "initech-bug",
    "acme/support/tier2",
    "2026-02-09",
    "customer:initech",
    "known_bug",
    "exporting their 12,000-row Gantt board times out; engineering ticket ENG-4471, fix planned for the April release",
)
F(
    "initech-bug-old",
    "acme/support/tier2",
    "2026-01-26",
    "customer:initech",
    "known_bug",
    "exporting their Gantt board times out; under investigation, no engineering ticket yet",
    role="superseded",
)
F(
    "initech-bug-tier1",
    "acme/support/tier1",
    "2026-02-09",
    "customer:initech",
    "known_bug",
    "Gantt export timeouts are a known issue: tag the ticket eng-4471 and pass it to tier 2",
    role="sibling",
)
R(
    "t2-bug-escalation",
    "acme/support/tier2",
    "2025-06-11",
    "kb://acme/tier2/bug-escalation",
    "Escalating a bug to engineering",
    "File an ENG ticket with steps to reproduce, the workspace id and the customer's plan, then link it on the "
    "support case.",
    role="near_miss",
)
Q(
    "q86",
    "alice",
    "Initech is chasing us again about their project timeline download that never finishes. Is there a dev ticket "
    "for it?",
    "initech-bug",
)

F(
    "umbrella-network",
    "acme/support",
    "2026-01-26",
    "customer:umbrella",
    "ip_allowlist",
    "sign-in is only accepted from their corporate VPN address range; staff who are not on the VPN see an "
    "'access restricted' page",
)
F(
    "umbrella-network-old",
    "acme/support",
    "2025-09-01",
    "customer:umbrella",
    "ip_allowlist",
    "none; members can sign in from anywhere",
    role="superseded",
)
F(
    "umbrella-timeout",
    "acme/support",
    "2025-11-14",
    "customer:umbrella",
    "session_timeout",
    "members are signed out after 8 hours without activity, at their security team's request",
    role="near_miss",
)
Q(
    "q87",
    "ben",
    "An Umbrella employee can get in fine at the office but not from home. What's going on?",
    "umbrella-network",
)

F(
    "hooli-tae",
    "acme/support/tier2",
    "2025-12-10",
    "customer:hooli",
    "technical_account_engineer",
    "Sam Okafor; copy him on every Hooli ticket rated P2 or higher",
)
F(
    "hooli-tae-tier1",
    "acme/support/tier1",
    "2025-12-10",
    "customer:hooli",
    "technical_account_engineer",
    "Sam Okafor; copy him on every Hooli ticket rated P2 or higher",
    role="sibling",
)
F(
    "hooli-sponsor",
    "acme/support",
    "2025-09-22",
    "customer:hooli",
    "executive_sponsor",
    "their VP of Engineering, who attends the quarterly business review",
    role="near_miss",
)
Q("q88", "alice", "Who on our side do I loop in when Hooli has a high-priority case?", "hooli-tae")

F(
    "cyberdyne-admin",
    "acme/support",
    "2026-01-21",
    "customer:cyberdyne",
    "workspace_admin",
    "Sarah Connor, since Miles Dyson left the company in January",
)
F(
    "cyberdyne-admin-old",
    "acme/support",
    "2025-10-01",
    "customer:cyberdyne",
    "workspace_admin",
    "Miles Dyson",
    role="superseded",
)
F(
    "cyberdyne-billing-contact",
    "acme/support",
    "2025-10-01",
    "customer:cyberdyne",
    "billing_contact",
    "their accounts payable team, reached only through the procurement portal",
    role="near_miss",
)
Q(
    "q89",
    "ben",
    "Miles from Cyberdyne doesn't work there anymore. Who do I go to now to approve changes to their setup?",
    "cyberdyne-admin",
)

F(
    "soylent-export",
    "acme/support/tier2",
    "2026-02-26",
    "customer:soylent",
    "export_request",
    "full archive requested on 20 February; download links sent to their admin on 26 February",
)
F(
    "soylent-export-old",
    "acme/support/tier2",
    "2026-02-20",
    "customer:soylent",
    "export_request",
    "full archive requested on 20 February; waiting for engineering to run it",
    role="superseded",
)
F(
    "soylent-admin",
    "acme/support",
    "2025-06-15",
    "customer:soylent",
    "workspace_admin",
    "Dr. Thorn, their operations director",
    role="background",
)
Q(
    "q90",
    "alice",
    "Soylent asked for a copy of all their stuff before they go. Did they ever receive it?",
    "soylent-export",
)

F(
    "wonka-closure",
    "acme/support",
    "2025-10-08",
    "customer:wonka",
    "annual_closure",
    "the factory shuts from 1 to 14 August and their admin is unreachable then; urgent issues go to their IT "
    "contractor",
)
F("wonka-timezone", "acme/support", "2025-04-01", "customer:wonka", "timezone", "Europe/London", role="near_miss")
Q("q91", "ben", "Is there a stretch of the year when nobody at Wonka will answer us?", "wonka-closure")

F(
    "vandelay-dupes",
    "acme/support/tier2",
    "2026-02-04",
    "customer:vandelay",
    "duplicate_accounts",
    "about 60 users have a second account under the old vandelay.net address; merge them with the account-merge "
    "tool, never delete either one",
)
Q("q92", "alice", "Some Vandelay people show up twice in the member list. What's the right fix?", "vandelay-dupes")

F(
    "piedpiper-licence",
    "acme/support",
    "2026-01-02",
    "customer:pied-piper",
    "licence_expiry",
    "their licence key is valid until 30 April 2026; a renewed key can only come from their account owner, "
    "support cannot issue one",
)
F(
    "piedpiper-licence-old",
    "acme/support",
    "2025-01-05",
    "customer:pied-piper",
    "licence_expiry",
    "their licence key is valid until 31 December 2025",
    role="superseded",
)
F(
    "piedpiper-feature",
    "acme/support",
    "2026-02-11",
    "customer:pied-piper",
    "feature_request",
    "wants compression statistics in the admin dashboard; logged as FR-2210",
    role="background",
)
R(
    "kb-licence-keys",
    "acme/support",
    "2025-08-19",
    "kb://acme/self-hosted-licence",
    "Licence keys for self-hosted installs",
    "Self-hosted installs check their licence key daily and warn admins 30 days before it runs out; the app keeps "
    "working for 14 days after expiry.",
    role="near_miss",
)
Q(
    "q93",
    "ben",
    "Pied Piper's servers are warning that their subscription file is about to lapse. Can I generate them a new one?",
    "piedpiper-licence",
)

F(
    "stark-subprocessors",
    "acme",
    "2025-10-14",
    "customer:stark",
    "subprocessor_notice",
    "must be told in writing 30 days before we start using any new sub-processor; they may object within that time",
)
F(
    "stark-questionnaire",
    "acme/support",
    "2025-09-30",
    "customer:stark",
    "security_questionnaire",
    "their vendor security review is repeated every September and takes about six weeks",
    role="near_miss",
)
Q(
    "q94",
    "alice",
    "We're bringing in a new analytics vendor next month. Does Stark have to hear about it first?",
    "stark-subprocessors",
)

F(
    "dunder-invoices",
    "acme/support",
    "2025-11-15",
    "customer:dunder-mifflin",
    "invoice_address",
    "the Scranton branch, for the attention of accounting; not corporate headquarters in New York",
)
F(
    "dunder-invoices-old",
    "acme/support",
    "2025-03-01",
    "customer:dunder-mifflin",
    "invoice_address",
    "corporate headquarters in New York",
    role="superseded",
)
F(
    "dunder-payment",
    "acme/support",
    "2025-03-01",
    "customer:dunder-mifflin",
    "payment_method",
    "paper cheque, usually about three weeks after the invoice date",
    role="near_miss",
)
Q("q95", "ben", "Where should Dunder Mifflin's bills be sent?", "dunder-invoices")

F(
    "md-plan",
    "acme/support",
    "2025-07-14",
    "customer:massive-dynamic",
    "plan",
    "Enterprise Pro, which allows up to 1,000 members",
    role="background",
)
F(
    "md-sso",
    "acme/support",
    "2025-07-14",
    "customer:massive-dynamic",
    "sso_provider",
    "Ping Identity over SAML, with SCIM provisioning of new staff",
    role="near_miss",
)
F(
    "md-leavers",
    "acme/support/tier2",
    "2026-01-30",
    "customer:massive-dynamic",
    "deprovisioning",
    "their SCIM connector only creates accounts and never removes them; leavers must be deactivated by hand in "
    "Admin > Members until they upgrade Ping",
)
F(
    "md-owner",
    "acme",
    "2025-07-14",
    "customer:massive-dynamic",
    "account_owner",
    "Tom Ellis in customer success",
    role="background",
)
Q(
    "q96",
    "alice",
    "People who quit Massive Dynamic months ago still show as active users. Why isn't that cleaning itself up?",
    "md-leavers",
)

F(
    "aperture-plan",
    "acme/support",
    "2026-01-30",
    "customer:aperture",
    "plan",
    "Business, up to 150 members",
    role="background",
)
F(
    "aperture-trial",
    "acme/support",
    "2026-02-12",
    "customer:aperture",
    "trial_status",
    "trial already extended once, to 15 March 2026; sales will not extend it again",
)
F(
    "aperture-trial-old",
    "acme/support",
    "2026-01-30",
    "customer:aperture",
    "trial_status",
    "14-day trial ending 13 February 2026",
    role="superseded",
)
P(
    "aperture-contact",
    "acme/support",
    "2026-02-02",
    "customer:aperture",
    "contact_channel",
    "the in-app chat; their lab lead usually replies within the hour",
    role="near_miss",
)
F(
    "aperture-usecase",
    "acme/support",
    "2026-01-30",
    "customer:aperture",
    "use_case",
    "lab notebooks and scheduling of test sessions",
    role="background",
)
Q("q97", "ben", "Aperture wants a few more weeks to try us out before buying. Can we give them that?", "aperture-trial")

F(
    "oscorp-plan",
    "acme/support",
    "2025-06-20",
    "customer:oscorp",
    "plan",
    "Enterprise, which allows up to 800 members",
    role="background",
)
F(
    "oscorp-region",
    "acme/support",
    "2025-06-20",
    "customer:oscorp",
    "data_region",
    "US-East (Virginia)",
    role="background",
)
F(
    "oscorp-credit",
    "acme/support/tier2",
    "2026-01-16",
    "customer:oscorp",
    "credits_issued",
    "$400 goodwill credit for the 14 January outage, approved by the support manager; nothing further is owed for "
    "that incident",
)
F(
    "oscorp-credit-old",
    "acme/support/tier2",
    "2025-06-20",
    "customer:oscorp",
    "credits_issued",
    "none so far",
    role="superseded",
)
F(
    "oscorp-complaint",
    "acme/support",
    "2026-02-06",
    "customer:oscorp",
    "open_complaint",
    "unhappy with search speed since January; asked for a call with the product manager",
    role="near_miss",
)
Q(
    "q98",
    "alice",
    "Oscorp is asking for compensation for the January downtime. Have they already been given something?",
    "oscorp-credit",
)

P(
    "nakatomi-hours",
    "acme/support/tier1",
    "2025-12-05",
    "customer:nakatomi",
    "reply_deadline",
    "before 18:00 Tokyo time (09:00 UTC); anything later waits until their next business day",
)
P(
    "nakatomi-hours-tier2",
    "acme/support/tier2",
    "2025-12-05",
    "customer:nakatomi",
    "reply_deadline",
    "before 18:00 Tokyo time (09:00 UTC); anything later waits until their next business day",
    role="sibling",
)
P(
    "nakatomi-language",
    "acme/support",
    "2025-12-05",
    "customer:nakatomi",
    "support_language",
    "English in writing; Japanese on calls, through an interpreter",
    role="near_miss",
)
F(
    "nakatomi-plan",
    "acme/support",
    "2025-11-20",
    "customer:nakatomi",
    "plan",
    "Enterprise Pro, which allows up to 500 members",
    role="background",
)
F(
    "nakatomi-region",
    "acme/support",
    "2025-11-20",
    "customer:nakatomi",
    "data_region",
    "US-West (Oregon)",
    role="background",
)
Q("q99", "ben", "What's the latest I can get back to Nakatomi and still catch them the same day?", "nakatomi-hours")

# ====== batch 2: acme support, knowledge base, playbooks and agents' own preferences

R(
    "kb-login-email",
    "acme/support",
    "2025-09-15",
    "kb://acme/change-sign-in-address",
    "Changing your sign-in address",
    "Members change it themselves under Profile > Account; a confirmation goes to both the old and the new address. "
    "Members who sign in through SSO must have it changed in their identity provider.",
)
R(
    "kb-login-email-old",
    "acme/support",
    "2025-02-01",
    "kb://acme/change-sign-in-address",
    "Changing your sign-in address",
    "Members cannot change their sign-in address themselves; support changes it after checking the member's ID.",
    role="superseded",
)
R(
    "kb-rename-workspace",
    "acme/support",
    "2025-06-30",
    "kb://acme/rename-workspace",
    "Renaming a workspace",
    "Owners rename a workspace under Settings > General; its web address changes and old links redirect for 90 days.",
    role="near_miss",
)
Q(
    "q100",
    "ben",
    "Someone got married and her work address changed. How does she update what she logs in with?",
    "kb-login-email",
)

R(
    "kb-sso-recovery",
    "acme/support",
    "2025-11-20",
    "kb://acme/sso-break-glass",
    "When SSO is down",
    "Every SSO workspace keeps one owner who can still sign in with a password and a recovery code at "
    "/login/recovery. Support never switches SSO off for a customer.",
)
R(
    "kb-sso-recovery-old",
    "acme/support",
    "2025-03-01",
    "kb://acme/sso-break-glass",
    "When SSO is down",
    "If single sign-on breaks, support can switch the workspace back to password login once the owner is verified.",
    role="superseded",
)
R(
    "kb-sso-setup",
    "acme/support",
    "2025-05-06",
    "kb://acme/sso-setup",
    "Setting up single sign-on",
    "SSO needs Enterprise or Enterprise Pro; the customer uploads their IdP metadata under Admin > Security and "
    "tests with one account first.",
    role="near_miss",
)
Q(
    "q101",
    "alice",
    "The customer's identity provider is down and their whole company is locked out of our app. Can anyone on their "
    "side still get in?",
    "kb-sso-recovery",
)

R(
    "kb-billing-period",
    "acme",
    "2025-08-27",
    "kb://acme/change-billing-period",
    "Switching between monthly and annual billing",
    "Moving from monthly to annual takes effect at once and the unused days of the month are credited; annual to "
    "monthly only at renewal.",
)
Q(
    "q102",
    "ben",
    "Customer wants to switch to paying once a year starting today. What happens to the rest of the period they've "
    "already paid for?",
    "kb-billing-period",
)

R(
    "t2-erasure",
    "acme/support/tier2",
    "2025-10-29",
    "kb://acme/tier2/erasure-requests",
    "Erasure requests",
    "Check that the request comes from a workspace owner, open a DEL ticket for engineering and confirm completion "
    "to the requester within 30 days, as GDPR requires.",
)
R(
    "t1-erasure",
    "acme/support/tier1",
    "2025-10-29",
    "kb://acme/tier1/erasure-requests",
    "Erasure requests",
    "Do not confirm anything yourself: pass the ticket to tier 2 with the requester's name and workspace.",
    role="sibling",
)
Q(
    "q103",
    "alice",
    "A former customer wants every trace of their data gone from our systems. What's the procedure?",
    "t2-erasure",
)

R(
    "t1-verify-caller",
    "acme/support/tier1",
    "2025-10-06",
    "kb://acme/tier1/verify-caller",
    "Verifying a caller",
    "Ask for the workspace name, then send a one-time code to the owner's address on file and have them read it "
    "back. A name and date of birth are never enough.",
)
R(
    "t1-verify-caller-old",
    "acme/support/tier1",
    "2025-01-10",
    "kb://acme/tier1/verify-caller",
    "Verifying a caller",
    "Ask for the workspace name and the billing postcode.",
    role="superseded",
)
Q("q104", "ben", "How can I be sure the person on the phone really is the account holder?", "t1-verify-caller")

R(
    "kb-seat-reduction",
    "acme/support",
    "2025-07-22",
    "kb://acme/reduce-seats",
    "Removing paid seats",
    "Seats removed in the middle of a term are billed until the renewal date; the lower count applies from the "
    "first invoice after renewal.",
)
Q(
    "q105",
    "ben",
    "A customer cut their team in half last week. Will their next bill go down straight away?",
    "kb-seat-reduction",
)

R(
    "kb-merge-workspaces",
    "acme",
    "2025-05-28",
    "kb://acme/merge-workspaces",
    "Merging two workspaces",
    "Engineering can merge two workspaces if both are on the same plan and in the same region; it takes about a week "
    "and channels keep their history.",
)
Q(
    "q106",
    "ben",
    "A company signed up twice by accident and now runs two separate accounts with us. Can we fold them into one?",
    "kb-merge-workspaces",
)

P(
    "alice-signoff",
    "acme/support/tier2/alice",
    "2026-01-12",
    "agent:alice",
    "email_signoff",
    "first name only, no 'kind regards'",
    source="user_explicit",
)
P(
    "bob-signoff",
    "acme/support/tier2/bob",
    "2026-01-12",
    "agent:bob",
    "email_signoff",
    "full name and job title",
    role="sibling",
    source="user_explicit",
)
Q("q107", "alice", "How do I normally end my messages to customers?", "alice-signoff")

P(
    "ben-languages",
    "acme/support/tier1/ben",
    "2026-02-02",
    "agent:ben",
    "ticket_languages",
    "English, German and Dutch",
    source="user_explicit",
)
P(
    "ben-languages-old",
    "acme/support/tier1/ben",
    "2025-10-01",
    "agent:ben",
    "ticket_languages",
    "English and German",
    role="superseded",
    source="user_explicit",
)
P(
    "ben-hours",
    "acme/support/tier1/ben",
    "2026-01-20",
    "agent:ben",
    "working_hours",
    "07:00-15:00 CET, Tuesday to Saturday",
    role="background",
    source="user_explicit",
)
Q("q108", "ben", "Which of the foreign-language queues am I set up to cover?", "ben-languages")

# Background: more of the support org's memory.
R(
    "kb-custom-emoji",
    "acme",
    "2025-03-18",
    "kb://acme/custom-emoji",
    "Custom emoji",
    "Admins can upload up to 500 custom emoji; members can add their own only if an admin allows it.",
    role="background",
)
R(
    "kb-channel-archive",
    "acme",
    "2025-09-04",
    "kb://acme/archive-channel",
    "Archiving a channel",
    "Archived channels are read-only and can be reopened by any admin; their files still count toward storage.",
    role="background",
)

# ====== batch 2: acme SRE

F(
    "svc-billing-owner",
    "acme/sre",
    "2025-10-20",
    "service:billing-worker",
    "owner",
    "the payments-platform team, Slack channel #team-money; out of hours page the billing-primary rotation",
    source="service-catalog@v2",
)
F(
    "svc-billing-owner-old",
    "acme/sre",
    "2025-03-01",
    "service:billing-worker",
    "owner",
    "the finance-engineering team, Slack channel #fin-eng",
    role="superseded",
    source="service-catalog@v2",
)
F(
    "svc-notify-owner",
    "acme/sre",
    "2025-09-01",
    "service:notifications",
    "owner",
    "the messaging team, Slack channel #team-messaging",
    role="near_miss",
    source="service-catalog@v2",
)
Q("q109", "dana", "billing-worker is falling over at 3am. Which team do I wake up?", "svc-billing-owner")

F(
    "svc-sync-deps",
    "acme/sre",
    "2025-11-05",
    "service:sync-service",
    "dependencies",
    "needs postgres-main and session-store; while session-store is unavailable it keeps serving downloads but "
    "rejects uploads",
    source="service-catalog@v2",
)
Q("q110", "dana", "If the Redis that holds sessions falls over, what happens to sync-service?", "svc-sync-deps")

E(
    "ep-webhook-signing",
    "acme/sre/oncall",
    "2026-01-06",
    "notifications",
    "customer webhook receivers rejecting every delivery with a signature mismatch after the signing key rotation",
    "re-enabled the previous signing key next to the new one for 24 hours so customers could update",
    "fixed",
    "https://incidents.acme.example/INC-2276",
)
E(
    "ep-webhook-signing-platform",
    "acme/sre/platform",
    "2026-01-06",
    "notifications",
    "customer webhook receivers rejecting every delivery with a signature mismatch after the signing key rotation",
    "re-enabled the previous signing key next to the new one for 24 hours so customers could update",
    "fixed",
    "https://incidents.acme.example/INC-2276",
    role="sibling",
)
Q(
    "q111",
    "dana",
    "Since we changed credentials on notifications, customers' endpoints say our callbacks are forged. What sorted "
    "that out before?",
    "ep-webhook-signing",
)

E(
    "ep-search-oom-limit",
    "acme/sre/oncall",
    "2026-02-25",
    "search-indexer",
    "indexer pods OOM-killed while reindexing one very large workspace",
    "raised the pod memory limit to 8 GB",
    "failed",
    "https://incidents.acme.example/INC-2352",
    role="near_miss",
)
E(
    "ep-search-oom",
    "acme/sre/oncall",
    "2026-02-26",
    "search-indexer",
    "indexer pods OOM-killed while reindexing one very large workspace",
    "split the reindex into per-folder batches of 10,000 documents",
    "fixed",
    "https://incidents.acme.example/INC-2352",
)
Q(
    "q112",
    "dana",
    "search-indexer pods keep dying partway through rebuilding one giant tenant. What actually worked?",
    "ep-search-oom",
)

F(
    "svc-pg-window",
    "acme/sre",
    "2025-12-09",
    "service:postgres-main",
    "maintenance_window",
    "Tuesdays 05:00-06:00 UTC, for vacuum runs and minor-version upgrades only",
    source="service-catalog@v2",
)
F(
    "svc-pg-window-old",
    "acme/sre",
    "2025-04-01",
    "service:postgres-main",
    "maintenance_window",
    "Sundays 03:00-04:00 UTC",
    role="superseded",
    source="service-catalog@v2",
)
F(
    "svc-pg-version",
    "acme/sre",
    "2025-11-18",
    "service:postgres-main",
    "engine_version",
    "PostgreSQL 16.4",
    role="background",
    source="service-catalog@v2",
)
E(
    "ep-pg-connections",
    "acme/sre/oncall",
    "2026-01-19",
    "postgres-main",
    "connection pool exhausted during the nightly report job",
    "moved the report job to the async replica",
    "fixed",
    "https://incidents.acme.example/INC-2284",
    role="near_miss",
)
Q("q113", "dana", "When are we allowed to take postgres-main down for upkeep?", "svc-pg-window")

F(
    "svc-auth-session",
    "acme/sre",
    "2025-12-16",
    "service:auth-gateway",
    "session_lifetime",
    "12 hours; refresh tokens stay valid for 30 days",
    source="service-catalog@v2",
)
F(
    "svc-auth-session-old",
    "acme/sre",
    "2025-05-01",
    "service:auth-gateway",
    "session_lifetime",
    "24 hours; refresh tokens stay valid for 90 days",
    role="superseded",
    source="service-catalog@v2",
)
Q("q114", "dana", "How long before auth-gateway makes people sign in again?", "svc-auth-session")

P(
    "dana-handoff",
    "acme/sre/oncall/dana",
    "2026-01-03",
    "agent:dana",
    "handoff_notes",
    "written in the incident doc rather than Slack, open actions at the top",
    source="user_explicit",
)
P(
    "luis-handoff",
    "acme/sre/oncall/luis",
    "2026-01-03",
    "agent:luis",
    "handoff_notes",
    "a short voice call with the next person on call",
    role="sibling",
    source="user_explicit",
)
Q("q115", "dana", "Where do I leave things for whoever takes the pager after me?", "dana-handoff")

R(
    "rb-leaked-key",
    "acme/sre",
    "2025-07-30",
    "runbook://acme/leaked-credential",
    "A leaked credential",
    "Revoke it first, then rotate every service that shared it, then search the access logs for its use; tell "
    "security within one hour.",
    source="runbooks@v7",
)
R(
    "rb-access-review",
    "acme/sre",
    "2025-04-14",
    "runbook://acme/access-review",
    "Quarterly access review",
    "Team leads confirm each engineer's production access every quarter; access nobody used is removed.",
    role="near_miss",
    source="runbooks@v7",
)
Q(
    "q116",
    "dana",
    "Someone pushed a production API key to a public GitHub repo. What do we do, and in what order?",
    "rb-leaked-key",
)

R(
    "rb-incident-command",
    "acme/sre",
    "2025-09-01",
    "runbook://acme/declaring-incidents",
    "Declaring an incident",
    "Anyone on call may declare one; the first responder is incident commander until they hand over in the "
    "incident channel.",
    source="runbooks@v7",
)
R(
    "rb-incident-command-old",
    "acme/sre",
    "2025-02-01",
    "runbook://acme/declaring-incidents",
    "Declaring an incident",
    "Only the engineering manager may declare an incident and name its commander.",
    role="superseded",
    source="runbooks@v6",
)
Q(
    "q117",
    "dana",
    "Do I need a manager's OK before I call a sev, and who runs the response once I do?",
    "rb-incident-command",
)

R(
    "rb-hotfix",
    "acme/sre",
    "2025-10-02",
    "runbook://acme/hotfixes",
    "Hotfixes during an incident",
    "The incident commander may waive the 20-minute canary wait; one reviewer is still required.",
    source="runbooks@v7",
)
Q(
    "q118",
    "dana",
    "We're mid-outage and need a patch live fast. Can we skip the usual staged rollout wait?",
    "rb-hotfix",
)

E(
    "ep-clock-restart",
    "acme/sre/oncall",
    "2026-02-16",
    "api-gateway",
    "intermittent 401s: freshly issued tokens rejected as 'not yet valid'",
    "restarted the gateway pods",
    "inconclusive",
    "https://incidents.acme.example/INC-2336",
    role="near_miss",
)
E(
    "ep-clock-drift",
    "acme/sre/oncall",
    "2026-02-17",
    "api-gateway",
    "intermittent 401s: freshly issued tokens rejected as 'not yet valid'",
    "re-enabled NTP on two gateway nodes whose clocks had drifted by 90 seconds",
    "fixed",
    "https://incidents.acme.example/INC-2336",
)
Q(
    "q119",
    "dana",
    "Brand-new logins sometimes bounce with an auth error, then work if you retry a minute later. What fixed it last "
    "time?",
    "ep-clock-drift",
)

E(
    "ep-dst-reports",
    "acme/sre/oncall",
    "2025-10-27",
    "report-scheduler",
    "weekly usage reports emailed twice to every customer on the night the clocks went back",
    "moved the scheduler's cron to UTC",
    "fixed",
    "https://incidents.acme.example/INC-2168",
)
Q("q120", "dana", "Why did every customer receive the same usage digest twice at the end of October?", "ep-dst-reports")

# Background: more of the SRE team's memory, and the platform team's (out of dana's scope).
F(
    "svc-report-owner",
    "acme/sre",
    "2025-09-01",
    "service:report-scheduler",
    "owner",
    "the analytics team, Slack channel #team-analytics",
    role="background",
    source="service-catalog@v2",
)
R(
    "rb-platform-secrets",
    "acme/sre/platform",
    "2025-08-12",
    "runbook://acme/platform/secret-rotation",
    "Rotating secrets",
    "Secrets rotate every 90 days through Vault; services reload them without a restart.",
    role="sibling",
    source="runbooks@v7",
)
E(
    "ep-cache-stampede",
    "acme/sre/oncall",
    "2026-01-25",
    "api-gateway",
    "latency spike every hour on the hour when cached workspace settings expired together",
    "added random jitter to the cache TTL",
    "fixed",
    "https://incidents.acme.example/INC-2296",
    role="background",
)

# ====== batch 2: northwind orders and customers

F(
    "nw90114-items",
    "northwind/commerce",
    "2026-02-20",
    "order:NW-90114",
    "items",
    "a standing desk frame, sent by freight",
    role="background",
    source="shop-db@v9",
)
F(
    "nw90114-delivery-shipped",
    "northwind/commerce",
    "2026-02-21",
    "order:NW-90114",
    "delivery_status",
    "shipped by freight from the New Jersey warehouse",
    role="superseded",
    source="carrier-webhook@v2",
)
F(
    "nw90114-cancel",
    "northwind/commerce/returns",
    "2026-02-27",
    "order:NW-90114",
    "cancellation_request",
    "too late to stop the carrier; the buyer will refuse delivery and is refunded once the desk is back at the "
    "warehouse",
    source="shop-db@v9",
)
F(
    "nw90114-cancel-old",
    "northwind/commerce/returns",
    "2026-02-26",
    "order:NW-90114",
    "cancellation_request",
    "buyer asked to cancel; waiting for the warehouse to say whether it has left",
    role="superseded",
    source="shop-db@v9",
)
Q(
    "q121",
    "omar",
    "The NW-90114 buyer wanted out of the order since it's running late. Where did we land on that?",
    "nw90114-cancel",
)

F(
    "nw81502-items",
    "northwind/commerce",
    "2026-02-12",
    "order:NW-81502",
    "items",
    "a cast-iron skillet and two oven mitts",
    role="background",
    source="shop-db@v9",
)
F(
    "nw81502-refund",
    "northwind/commerce/payments",
    "2026-02-24",
    "order:NW-81502",
    "refund_status",
    "$84.50 refunded to the buyer's PayPal on 24 February; they chose not to have it sent again",
    source="shop-db@v9",
)
F(
    "nw81502-refund-old",
    "northwind/commerce/payments",
    "2026-02-20",
    "order:NW-81502",
    "refund_status",
    "on hold until the parcel is back at the warehouse",
    role="superseded",
    source="shop-db@v9",
)
F(
    "nw81502-refund-returns",
    "northwind/commerce/returns",
    "2026-02-24",
    "order:NW-81502",
    "refund_status",
    "$84.50 refunded to the buyer's PayPal on 24 February; they chose not to have it sent again",
    role="sibling",
    source="shop-db@v9",
)
Q(
    "q122",
    "pia",
    "NW-81502 came back to us undelivered. Has the customer had their money returned, or are we reshipping?",
    "nw81502-refund",
)

F(
    "c20417-returns",
    "northwind/commerce/returns",
    "2026-01-15",
    "customer:C-20417",
    "return_history",
    "sent back 9 of 14 orders in the last year; flagged for serial returns, so no prepaid labels and exchanges only",
    source="shop-db@v9",
)
F(
    "c20417-returns-old",
    "northwind/commerce/returns",
    "2025-07-01",
    "customer:C-20417",
    "return_history",
    "no unusual return activity",
    role="superseded",
    source="shop-db@v9",
)
R(
    "nw-plus-benefits",
    "northwind/commerce",
    "2025-04-10",
    "policy://northwind/plus-membership",
    "Northwind Plus",
    "Plus members pay $49 a year for free express delivery, free return labels and early access to sales.",
    role="near_miss",
    source="policy-site@v3",
)
Q(
    "q123",
    "omar",
    "C-20417 wants another free shipping label to send something back. Any reason not to just issue one?",
    "c20417-returns",
)

F(
    "c51007-cards",
    "northwind/commerce/payments",
    "2025-11-20",
    "customer:C-51007",
    "saved_payment_methods",
    "a Visa ending 4417 and a PayPal account; the Amex was removed after the second chargeback",
    source="shop-db@v9",
)
F(
    "c51007-cards-old",
    "northwind/commerce/payments",
    "2025-02-01",
    "customer:C-51007",
    "saved_payment_methods",
    "a Visa ending 4417 and an Amex ending 1009",
    role="superseded",
    source="shop-db@v9",
)
Q("q124", "pia", "Which cards does C-51007 still have stored with us?", "c51007-cards")

F(
    "c66230-address",
    "northwind/commerce",
    "2025-09-01",
    "customer:C-66230",
    "shipping_address",
    "an apartment in Montreal, Quebec",
    role="background",
    source="shop-db@v9",
)
F(
    "c66230-rma",
    "northwind/commerce/returns",
    "2026-02-25",
    "customer:C-66230",
    "open_return",
    "RMA-5521 for a blender: label emailed on 25 February, parcel not scanned by the warehouse yet",
    source="warehouse-scan@v4",
)
F(
    "c66230-rma-old",
    "northwind/commerce/returns",
    "2026-02-22",
    "customer:C-66230",
    "open_return",
    "RMA-5521 opened for a blender; label not sent yet",
    role="superseded",
    source="warehouse-scan@v4",
)
Q("q125", "omar", "Has the kitchen appliance C-66230 was sending back reached us yet?", "c66230-rma")

F(
    "nw93377-items",
    "northwind/commerce",
    "2026-02-26",
    "order:NW-93377",
    "items",
    "an espresso machine and a burr grinder",
    role="background",
    source="shop-db@v9",
)
F(
    "nw93377-delivery",
    "northwind/commerce",
    "2026-02-28",
    "order:NW-93377",
    "delivery_status",
    "not shipped: waiting on payment",
    role="near_miss",
    source="carrier-webhook@v2",
)
F(
    "nw93377-payment",
    "northwind/commerce/payments",
    "2026-02-28",
    "order:NW-93377",
    "payment_status",
    "the Amex authorisation succeeded but the capture failed; nothing was charged and the hold drops off within 7 days",
    source="shop-db@v9",
)
F(
    "nw93377-payment-old",
    "northwind/commerce/payments",
    "2026-02-26",
    "order:NW-93377",
    "payment_status",
    "authorised on Amex, waiting for capture",
    role="superseded",
    source="shop-db@v9",
)
Q(
    "q126",
    "pia",
    "The NW-93377 customer sees a pending amount on their statement. Did we actually take the money?",
    "nw93377-payment",
)

F(
    "c74102-tier",
    "northwind/commerce",
    "2026-01-08",
    "customer:C-74102",
    "loyalty_tier",
    "Northwind Plus member since January 2026",
    role="background",
    source="shop-db@v9",
)
P("c74102-language", "northwind/commerce", "2026-01-08", "customer:C-74102", "language", "German", role="near_miss")
F(
    "c74102-address",
    "northwind/commerce",
    "2026-01-08",
    "customer:C-74102",
    "shipping_address",
    "a flat in Hamburg, Germany",
    role="background",
    source="shop-db@v9",
)
P(
    "c74102-refund",
    "northwind/commerce",
    "2026-02-01",
    "customer:C-74102",
    "refund_method",
    "store credit instead of money back to the card, as long as it arrives the same day",
)
P(
    "c74102-refund-old",
    "northwind/commerce",
    "2025-10-10",
    "customer:C-74102",
    "refund_method",
    "back to the original card",
    role="superseded",
)
Q("q127", "omar", "C-74102 is sending a coat back. How would they like to be reimbursed?", "c74102-refund")

F(
    "svc-processor",
    "northwind/commerce/payments",
    "2026-01-15",
    "service:payments-api",
    "card_processor",
    "Adyen for all new card payments since 15 January; refunds on orders placed before then still go through Stripe",
    source="service-catalog@v2",
)
F(
    "svc-processor-old",
    "northwind/commerce/payments",
    "2025-03-01",
    "service:payments-api",
    "card_processor",
    "Stripe for card payments and refunds",
    role="superseded",
    source="service-catalog@v2",
)
Q(
    "q128",
    "pia",
    "Refund for an order from before Christmas: which provider does payments-api push that through now?",
    "svc-processor",
)

# ====== batch 2: northwind policy, incidents and agents' own preferences

R(
    "nw-bundles",
    "northwind/commerce",
    "2025-08-05",
    "policy://northwind/bundles",
    "Bundles and sets",
    "A bundle must come back complete; any piece that is kept is deducted at its own list price.",
    source="policy-site@v3",
)
Q(
    "q129",
    "omar",
    "Shopper is sending back the pots-and-pans kit but wants to keep the frying pan. Do they still get the whole "
    "amount back?",
    "nw-bundles",
)

R(
    "nw-late-returns",
    "northwind/commerce/returns",
    "2025-10-10",
    "policy://northwind/returns/late-returns",
    "Returns after the window",
    "Up to 14 days late, offer store credit, once per customer; later than that, decline politely.",
    source="policy-site@v3",
)
R(
    "nw-late-returns-old",
    "northwind/commerce/returns",
    "2025-01-15",
    "policy://northwind/returns/late-returns",
    "Returns after the window",
    "Returns after the window are always declined.",
    role="superseded",
    source="policy-site@v3",
)
Q(
    "q130",
    "omar",
    "A customer missed the deadline for sending something back by about a week. Any wiggle room?",
    "nw-late-returns",
)

E(
    "ep-return-emails",
    "northwind/commerce/returns",
    "2026-02-09",
    "returns-portal",
    "customers not receiving the confirmation email after filing a return",
    "re-verified the sending domain's DKIM record after the DNS provider migration",
    "fixed",
    "https://jira.northwind.example/RET-826",
)
Q(
    "q131",
    "omar",
    "People who log a return online say nothing ever lands in their inbox afterwards.",
    "ep-return-emails",
)

E(
    "ep-heic-fail",
    "northwind/commerce/returns",
    "2026-02-16",
    "returns-portal",
    "photo upload fails for pictures taken on iPhones (HEIC format)",
    "purged the CDN cache for the upload page",
    "failed",
    "https://jira.northwind.example/RET-833",
    role="near_miss",
)
E(
    "ep-heic",
    "northwind/commerce/returns",
    "2026-02-18",
    "returns-portal",
    "photo upload fails for pictures taken on iPhones (HEIC format)",
    "added HEIC-to-JPEG conversion to the upload service",
    "fixed",
    "https://jira.northwind.example/RET-833",
)
Q(
    "q132",
    "omar",
    "Customers on Apple phones can't attach shots of the damage to their claim. What got it working?",
    "ep-heic",
)

P(
    "omar-queue",
    "northwind/commerce/returns/omar",
    "2026-01-20",
    "agent:omar",
    "queue_order",
    "oldest ticket first, except damaged-on-arrival cases, which go to the front",
    source="user_explicit",
)
P(
    "lena-queue",
    "northwind/commerce/returns/lena",
    "2026-01-20",
    "agent:lena",
    "queue_order",
    "Northwind Plus members first, then oldest",
    role="sibling",
    source="user_explicit",
)
P(
    "omar-signature",
    "northwind/commerce/returns/omar",
    "2026-01-20",
    "agent:omar",
    "reply_signature",
    "'Omar, Northwind Returns'",
    role="background",
    source="user_explicit",
)
Q("q133", "omar", "How do I like to work through my backlog?", "omar-queue")

R(
    "nw-closed-card",
    "northwind/commerce/payments",
    "2025-09-20",
    "policy://northwind/payments/closed-card-refunds",
    "Refunds to a closed card",
    "Refund to the original card even if it has been cancelled; the bank passes the money on. Only if the bank "
    "rejects it, offer store credit or a bank transfer.",
    source="policy-site@v3",
)
R(
    "nw-closed-card-old",
    "northwind/commerce/payments",
    "2025-02-02",
    "policy://northwind/payments/closed-card-refunds",
    "Refunds to a closed card",
    "If the original card has been closed, refund by bank transfer instead.",
    role="superseded",
    source="policy-site@v3",
)
R(
    "nw-closed-card-returns",
    "northwind/commerce/returns",
    "2025-09-20",
    "policy://northwind/returns/closed-card-refunds",
    "Refunds to a closed card",
    "Tell the customer the refund goes to the original card even if it has been cancelled; payments handles any "
    "bounce.",
    role="sibling",
    source="policy-site@v3",
)
Q(
    "q134",
    "pia",
    "The shopper's old Visa was shut down after some fraud. Where does their refund go now?",
    "nw-closed-card",
)

R(
    "nw-split-payment",
    "northwind/commerce",
    "2025-07-18",
    "policy://northwind/split-payments",
    "Paying with more than one method",
    "An order can be paid with one card plus any number of gift cards; two credit cards on a single order is not "
    "possible.",
    source="policy-site@v3",
)
Q(
    "q135",
    "pia",
    "A shopper wants to put half the bill on one Visa and the rest on another. Can they?",
    "nw-split-payment",
)

E(
    "ep-paypal-webhook",
    "northwind/commerce/payments",
    "2026-01-29",
    "payments-api",
    "PayPal orders stuck on 'awaiting payment' although the buyer had been charged",
    "re-registered the PayPal webhook URL after the shop's domain change",
    "fixed",
    "https://jira.northwind.example/PAY-428",
)
Q(
    "q136",
    "pia",
    "People checking out with PayPal get billed but their order never flips to paid. What fixed that?",
    "ep-paypal-webhook",
)

E(
    "ep-card-testing",
    "northwind/commerce/payments",
    "2026-02-22",
    "payments-api",
    "thousands of $1 authorisations from newly created accounts overnight (card testing)",
    "turned on CAPTCHA at checkout and blocked the card range being tested",
    "fixed",
    "https://jira.northwind.example/PAY-444",
)
Q(
    "q137",
    "pia",
    "We're seeing loads of tiny charges from brand-new accounts in the middle of the night. What did we do last time?",
    "ep-card-testing",
)

P(
    "pia-refund-note",
    "northwind/commerce/payments/pia",
    "2026-01-25",
    "agent:pia",
    "refund_note_format",
    "one line: order number, amount, reason code, in that order",
    source="user_explicit",
)
P(
    "raj-refund-note",
    "northwind/commerce/payments/raj",
    "2026-01-25",
    "agent:raj",
    "refund_note_format",
    "free text, in the customer's own words",
    role="sibling",
    source="user_explicit",
)
Q("q138", "pia", "How do I usually write up the internal comment when I send money back to someone?", "pia-refund-note")

# Background: more of the shop's memory.
E(
    "ep-gift-balance",
    "northwind/commerce/payments",
    "2026-01-11",
    "payments-api",
    "gift card balances showing zero right after checkout",
    "rebuilt the balance cache",
    "fixed",
    "https://jira.northwind.example/PAY-416",
    role="background",
)
R(
    "nw-preorders",
    "northwind/commerce",
    "2025-11-03",
    "policy://northwind/preorders",
    "Pre-orders",
    "Pre-orders can be cancelled at any time before they ship; the release date shown is an estimate.",
    role="background",
    source="policy-site@v3",
)


# ================================================================================ checks


def _slot(m: dict) -> tuple:
    f = m["fields"]
    if m["kind"] in ("fact", "preference"):
        return m["kind"], f["subject"].casefold(), f["attribute"].casefold()
    if m["kind"] == "reference":
        return "reference", f["uri"]
    return "episode", m["label"]


def _valid_from(m: dict) -> datetime:
    f = m["fields"]
    return datetime.fromisoformat(f.get("valid_from") or f.get("observed_at") or f["published_at"])


def _readable(principal_scope: str, scope: str) -> bool:
    return principal_scope.split("/")[: len(scope.split("/"))] == scope.split("/")


def check() -> None:
    """The fixture's own rules: every label unique, every answer served to its asker."""
    labels = [m["label"] for m in MEMORIES]
    dupes = [x for x, n in Counter(labels).items() if n > 1]
    assert not dupes, dupes
    by_label = {m["label"]: m for m in MEMORIES}
    heads: dict[tuple, dict] = {}
    for m in MEMORIES:
        key = (_slot(m), m["scope"])
        if key not in heads or _valid_from(m) > _valid_from(heads[key]):
            heads[key] = m
        assert _valid_from(m) < NOW, m["label"]
        if m["kind"] == "preference":
            assert _valid_from(m) + PREFERENCE_TTL > NOW, f"{m['label']} would have expired"
        if m["kind"] == "episode" and m["fields"]["outcome"] == "failed":
            assert _valid_from(m) + FAILED_EPISODE_TTL > NOW, f"{m['label']} would have expired"
    for m in MEMORIES:  # superseded <=> a newer version of the same slot at the same scope
        newest = heads[(_slot(m), m["scope"])]
        assert (m["role"] == "superseded") == (newest is not m), m["label"]
    qids = [q["qid"] for q in QUERIES]
    assert len(set(qids)) == len(qids)
    answers = [q["answer"] for q in QUERIES]
    assert len(set(answers)) == len(answers), "one query per answer"
    for q in QUERIES:
        m = by_label[q["answer"]]
        assert m["role"] == "answer", q
        assert _readable(PRINCIPALS[q["principal"]], m["scope"]), q
        # no other current memory the asker can read fills the answer's slot (it would shadow or rival it)
        rivals = [
            x["label"]
            for x in MEMORIES
            if x is not m
            and x["role"] != "superseded"
            and _slot(x) == _slot(m)
            and _readable(PRINCIPALS[q["principal"]], x["scope"])
        ]
        assert not rivals, (q["qid"], rivals)
    for m in MEMORIES:  # a sibling copy sits next to some asker's scope, where that asker cannot read it
        if m["role"] == "sibling":
            parent = m["scope"].rsplit("/", 1)[0]
            assert any(_readable(s, parent) and not _readable(s, m["scope"]) for s in PRINCIPALS.values()), m
    assert len(MEMORIES) >= 200 and len(QUERIES) >= 60, (len(MEMORIES), len(QUERIES))


def main(out: Path | None = None) -> None:
    check()
    out = out or Path(__file__).with_name("fixture.jsonl")
    meta = {
        "type": "meta",
        "name": "memory_lakehouse retrieval fixture",
        "version": 2,
        "now": NOW.isoformat(),
        "principals": PRINCIPALS,
        "memories": len(MEMORIES),
        "queries": len(QUERIES),
        "roles": dict(sorted(Counter(m["role"] for m in MEMORIES).items())),
    }
    lines = [meta] + MEMORIES + QUERIES
    out.write_text("".join(json.dumps(x, ensure_ascii=False, sort_keys=True) + "\n" for x in lines), encoding="utf-8")
    print(f"wrote {out} ({len(MEMORIES)} memories, {len(QUERIES)} queries, {out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
