"""A small generated conversation in LoCoMo's format (no real data): for the LoCoMo eval's tests.

Each session has its own topic words, so a question about a topic has one right
session; a few evidence ids are malformed the way the real release's are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOPICS = [
    ("pottery", "clay", "kiln", "glaze"),
    ("marathon", "running", "shoes", "training"),
    ("violin", "concert", "orchestra", "rehearsal"),
    ("garden", "tomatoes", "compost", "seedlings"),
]
DATES = ["1:56 pm on 8 May, 2023", "10:05 am on 2 June, 2023", "7:30 pm on 15 July, 2023", "9:00 am on 1 August, 2023"]


def conversation(seed: int = 0, *, sessions: int = 3, turns: int = 6) -> dict[str, Any]:
    """A conversation of *sessions* sessions of *turns* turns; seed rotates the topics."""
    a, b = ("Ava", "Ben") if seed % 2 == 0 else ("Cleo", "Dan")
    data: dict[str, Any] = {"speaker_a": a, "speaker_b": b, "qa": []}
    for n in range(1, sessions + 1):
        topic = TOPICS[(n - 1 + seed) % len(TOPICS)]
        data[f"session_{n}_date_time"] = DATES[n - 1]
        data[f"session_{n}"] = [
            {
                "speaker": (a, b)[i % 2],
                "dia_id": f"D{n}:{i + 1}",
                "text": f"we talked about {topic[i % len(topic)]} and {topic[(i + 1) % len(topic)]} today, part {i}",
            }
            for i in range(turns)
        ]
        data["qa"].append(
            {
                "question": f"What did {a} say about the {topic[1]} and {topic[2]}?",
                "answer": topic[0],
                "evidence": [f"D{n}:2"],
                "category": 4,
            }
        )
        data["qa"].append(
            {
                "question": f"When did they discuss {topic[0]}?",
                "answer": DATES[n - 1],
                "evidence": [f"D:{n}:1"],
                "category": 2,
            }
        )  # malformed the release's way
    data["qa"].append(
        {"question": "Which two hobbies came up?", "answer": "two", "evidence": ["D1:1; D2:1"], "category": 1}
    )
    data["qa"].append(
        {"question": "What is Ava's favourite car?", "adversarial_answer": "none", "evidence": ["D1:3"], "category": 5}
    )
    data["qa"].append({"question": "Does this name a turn?", "answer": "no", "evidence": ["D"], "category": 4})
    return data


def write(folder: Path, count: int = 3, **kw: Any) -> list[Path]:
    """*count* conversations as ``<n>.json`` files in *folder*."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"{i + 1}.json"
        path.write_text(json.dumps(conversation(i, **kw)), encoding="utf-8")
        paths.append(path)
    return paths
