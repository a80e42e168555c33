"""Generate the small conversation samples in data/conversations/ (LoCoMo and LongMemEval formats).

Everything here is made up: no benchmark data goes into the repository (its license is
its authors'). The samples have the shape of the real files, so the loaders' tests and
CI run on them; a user passes the path of the real data.

    python scripts/make_conversation_samples.py          # rewrites data/conversations/*.json
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "data" / "conversations"

TOPICS = [
    ("pottery", "I signed up for a pottery class on Tuesdays.", "When does Ada go to pottery class?", "Tuesdays"),
    ("marathon", "I am training for the Lisbon marathon in October.", "Which marathon is Ada training for?", "Lisbon"),
    ("dog", "We adopted a beagle called Biscuit last weekend.", "What is the name of Ada's dog?", "Biscuit"),
    ("job", "I started a new job at a bakery downtown.", "Where does Ada work now?", "a bakery downtown"),
    ("trip", "We are flying to Oslo for the winter holidays.", "Where is Ada going for the holidays?", "Oslo"),
    ("garden", "My tomatoes finally turned red this week.", "What grew in Ada's garden?", "tomatoes"),
]
FILLER = [
    "Hey! Good to see you, how have you been?",
    "That sounds lovely.",
    "Haha, totally.",
    "Wow, tell me more!",
    "Anyway, talk soon!",
    "Take care!",
]


def _locomo_date(at: datetime) -> str:
    hour = at.hour % 12 or 12
    return f"{hour}:{at.minute:02d} {'pm' if at.hour >= 12 else 'am'} on {at.day} {at.strftime('%B')}, {at.year}"


def locomo(rng: random.Random) -> dict[str, Any]:
    """One conversation between Ada and Ben: four sessions, one shared photo, five questions."""
    start = datetime(2023, 3, 4, 13, 56, tzinfo=UTC)
    conv: dict[str, Any] = {"speaker_a": "Ada", "speaker_b": "Ben"}
    qa = []
    for s in range(1, 5):
        at = start + timedelta(days=17 * (s - 1), minutes=rng.randint(0, 300))
        turns = []
        topic = TOPICS[s - 1]
        lines = [
            ("Ada", FILLER[0]),
            ("Ben", rng.choice(FILLER[1:4])),
            ("Ada", topic[1]),
            ("Ben", f"Nice, how is the {topic[0]} going?"),
            ("Ada", rng.choice(FILLER[1:4])),
            ("Ben", FILLER[4 + s % 2]),
        ]
        for t, (speaker, text) in enumerate(lines, 1):
            turn: dict[str, Any] = {"speaker": speaker, "dia_id": f"D{s}:{t}", "text": text}
            if s == 3 and t == 4:
                turn.update(
                    img_url=["https://example.invalid/photo.jpg"],
                    blip_caption="a photo of a small beagle",
                    query="beagle puppy",
                )
            turns.append(turn)
        conv[f"session_{s}_date_time"] = _locomo_date(at)
        conv[f"session_{s}"] = turns
        conv[f"session_{s}_observation"] = {"Ada": [[topic[1], f"D{s}:3"]]}
        conv[f"session_{s}_summary"] = f"Ada told Ben about {topic[0]}."
        qa.append({"question": topic[2], "answer": topic[3], "evidence": [f"D{s}:3"], "category": 4})
    conv["session_5_date_time"] = _locomo_date(start + timedelta(days=90))  # a date with no session, as in the release
    conv["session_5"] = []
    qa.append(
        {"question": "What is Ben's favourite opera?", "adversarial_answer": "Tosca", "evidence": [], "category": 5}
    )
    qa.append(
        {
            "question": "What did Ada start before adopting a dog?",
            "answer": "pottery and marathon training",
            "evidence": ["D1:3; D2:3"],
            "category": 1,
        }
    )
    conv["qa"] = qa
    return conv


def _lme_date(at: datetime) -> str:
    return at.strftime("%Y/%m/%d (%a) %H:%M")


def longmemeval(rng: random.Random) -> list[dict[str, Any]]:
    """Three questions over five sessions; two questions share sessions; one is an abstention."""
    start = datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    sessions = {}
    for n, topic in enumerate(TOPICS[:5]):
        sid = f"answer_{topic[0]}_{n + 1}" if n in (1, 3) else f"sharegpt_{topic[0]}_{n}"
        sessions[sid] = (
            start + timedelta(days=9 * n, hours=rng.randint(0, 5)),
            [
                {"role": "user", "content": "Hi there!"},
                {"role": "assistant", "content": "Hello! How can I help you today?"},
                {"role": "user", "content": topic[1], **({"has_answer": True} if n in (1, 3) else {})},
                {"role": "assistant", "content": f"That is great news about the {topic[0]}."},
            ],
        )
    ids = list(sessions)

    def question(
        qid: str, qtype: str, text: str, answer: str, use: list[str], answers: list[str], asked: datetime
    ) -> dict[str, Any]:
        return {
            "question_id": qid,
            "question_type": qtype,
            "question": text,
            "answer": answer,
            "question_date": _lme_date(asked),
            "haystack_session_ids": use,
            "haystack_dates": [_lme_date(sessions[s][0]) for s in use],
            "haystack_sessions": [sessions[s][1] for s in use],
            "answer_session_ids": answers,
        }

    return [
        question(
            "q_marathon",
            "single-session-user",
            TOPICS[1][2].replace("Ada", "I"),
            TOPICS[1][3],
            ids[:3],
            [ids[1]],
            sessions[ids[2]][0] + timedelta(days=1),
        ),
        question(
            "q_job",
            "single-session-user",
            "Where do I work now?",
            TOPICS[3][3],
            ids,
            [ids[3]],
            sessions[ids[4]][0] + timedelta(days=2),
        ),
        question(
            "q_opera_abs",
            "single-session-user",
            "What is my favourite opera?",
            "You did not mention an opera.",
            ids[1:],
            [],
            sessions[ids[4]][0] + timedelta(days=2),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(11)
    (args.out / "locomo_sample.json").write_text(json.dumps(locomo(rng), indent=1) + "\n", encoding="utf-8")
    (args.out / "longmemeval_sample.json").write_text(json.dumps(longmemeval(rng), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}/locomo_sample.json and longmemeval_sample.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
