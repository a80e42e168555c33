"""Bad input at the command line: one line on stderr, exit 2, no traceback, nothing changed on disk.

Every case here is a row of docs/bad-input.md, and every row of that table is a case
here: the test runs the command, compares every file under the working directory
(names and bytes) before and after, and checks that the message it printed is the
one the doc shows, so the doc cannot go stale.

Paths: each case runs in a fresh directory that the doc calls ``/data``.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memory_lakehouse.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "bad-input.md"
AS = ["--as", "alice", "--scope", "acme/support", "--role", "curator"]
GOOD = {
    "kind": "fact",
    "subject": "user:42",
    "attribute": "plan",
    "value": "Pro",
    "valid_from": "2026-09-01T09:00:00Z",
    "source": "user_explicit",
}


def jsonl(*records: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def deny_listing(path: str) -> Callable[[pytest.MonkeyPatch, Path], None]:
    """Make listing *path* fail as it does on a chmod-000 directory (the tests run as root,
    whom chmod does not stop)."""

    def setup(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        real = os.listdir
        target = str(root / path)

        def listdir(p: str | os.PathLike[str] = ".") -> list[str]:
            if str(p) == target:
                raise PermissionError(13, "Permission denied", target)
            return real(p)

        (root / path).mkdir(exist_ok=True)
        monkeypatch.setattr(os, "listdir", listdir)

    return setup


def read_only_store(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Make the store's appends fail as delta-rs, and the direct path, fail on a read-only directory."""
    from deltalake.exceptions import DeltaError

    import memory_lakehouse.lake as lake

    def refuse(*args: object, **kwargs: object) -> None:
        raise DeltaError(
            f"Generic LocalFileSystem error: Unable to open file {root}/store/fact/part-0.parquet: "
            "Permission denied (os error 13)"
        )

    def refuse_file(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", f"{root}/store/fact/part-0.parquet")

    monkeypatch.setattr(lake, "write_deltalake", refuse)
    monkeypatch.setattr(
        "memory_lakehouse.direct_append.pq.write_table", refuse_file
    )  # the direct path's own write (local stores)


@dataclass(frozen=True)
class Case:
    tried: str  # the doc's first column
    argv: list[str]
    message: str  # with /data for the case's directory
    stdin: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    setup: Callable[[pytest.MonkeyPatch, Path], None] | None = None


CASES = [
    Case(
        "non-UTF-8 bytes on stdin",
        ["write", "--store", "store", *AS],
        "memlake: ValidationError: stdin line 1: not UTF-8 text (byte 0xff at column 1)",
        stdin=b"\xff\xfe{}\n",
    ),
    Case(
        "non-UTF-8 bytes in --file (line 2)",
        ["write", "--store", "store", "--file", "in.jsonl", *AS],
        "memlake: ValidationError: in.jsonl line 2: not UTF-8 text (byte 0xe9 at column 14)",
        files={"in.jsonl": jsonl(GOOD) + b'{"value":"caf\xe9"}\n'},
    ),
    Case(
        "--file that does not exist",
        ["write", "--store", "store", "--file", "missing.jsonl", *AS],
        "memlake: ValidationError: --file missing.jsonl: no such file or directory",
    ),
    Case(
        "a line that is not JSON",
        ["write", "--store", "store", *AS],
        "memlake: ValidationError: stdin line 2: not JSON (Expecting value at column 1)",
        stdin=jsonl(GOOD) + b"market=US\n",
    ),
    Case(
        "a misspelt field on line 3 of 3",
        ["write", "--store", "store", "--file", "big.jsonl", *AS],
        "memlake: ValidationError: big.jsonl line 3: fact has no field(s) valid_frm",
        files={
            "big.jsonl": jsonl(
                GOOD,
                {**GOOD, "subject": "user:43"},
                {k if k != "valid_from" else "valid_frm": v for k, v in GOOD.items()},
            )
        },
    ),
    Case(
        "a time without a zone on line 3 of 3 (found by the write path)",
        ["write", "--store", "store", "--file", "big.jsonl", *AS],
        "memlake: ValidationError: big.jsonl line 3: valid_from: '2026-09-01T09:00:00' has no time zone: "
        "add Z for UTC (2026-10-04T14:32:00Z) or an offset such as +02:00",
        files={
            "big.jsonl": jsonl(
                GOOD,
                {**GOOD, "subject": "user:43"},
                {**GOOD, "subject": "user:44", "valid_from": "2026-09-01T09:00:00"},
            )
        },
    ),
    Case(
        '"ttl": "thirty days" on a preference',
        ["write", "--store", "store", *AS],
        "memlake: ValidationError: stdin line 1: ttl 'thirty days' is not a duration: write a number and a "
        "unit, like 30d, 12h, 15m or 45s (or ttl_seconds: a number)",
        stdin=jsonl({**GOOD, "kind": "preference", "attribute": "language", "ttl": "thirty days"}),
    ),
    Case(
        "a lone surrogate in a value",
        ["write", "--store", "store", *AS],
        "memlake: ValidationError: stdin line 1: value holds a lone surrogate ('\\udc80' at character 4): "
        "not valid Unicode text",
        stdin=b'{"kind": "fact", "subject": "user:42", "attribute": "plan", "value": "Pro \\udc80", '
        b'"valid_from": "2026-09-01T09:00:00Z", "source": "user_explicit"}\n',
    ),
    Case(
        "a 100 kB value",
        ["write", "--store", "store", *AS],
        "memlake: ValidationError: stdin line 1: value is 100,000 bytes of UTF-8 text, over the limit of "
        "65,536 bytes per field (max_text_bytes)",
        stdin=jsonl({**GOOD, "value": "x" * 100_000}),
    ),
    Case(
        "--store naming a regular file (init)",
        ["init", "--store", "notes.txt"],
        "memlake: StoreError: /data/notes.txt is a file, not a memory store directory",
        files={"notes.txt": b"my notes\n"},
    ),
    Case(
        "--store naming a regular file (read)",
        ["fact", "user:42", "plan", "--store", "notes.txt", *AS],
        "memlake: StoreError: /data/notes.txt is a file, not a memory store directory",
        files={"notes.txt": b"my notes\n"},
    ),
    Case(
        "reading a store that does not exist",
        ["fact", "user:42", "plan", "--store", "nowhere", *AS],
        "memlake: StoreError: no memory store at /data/nowhere: the directory does not exist "
        "(memlake init --store /data/nowhere creates one)",
    ),
    Case(
        "init on a directory nobody may read (chmod 000)",
        ["init", "--store", "locked"],
        "memlake: StoreError: cannot read the store at /data/locked: permission denied",
        setup=deny_listing("locked"),
    ),
    Case(
        "reading a store nobody may read (chmod 000)",
        ["fact", "user:42", "plan", "--store", "store", *AS],
        "memlake: StoreError: cannot read the store at /data/store: permission denied",
        setup=deny_listing("store"),
    ),
    Case(
        "writing to a read-only store",
        ["write", "--store", "store", *AS],
        "memlake: StoreError: cannot write to the store at /data/store: permission denied",
        stdin=jsonl({**GOOD, "subject": "user:43"}),
        setup=read_only_store,
    ),
    Case(
        "--facts that is not JSON",
        ["policy", "resolve", "--facts", "market=US", "--at", "2026-09-05", "--store", "store", *AS],
        "memlake: ValidationError: --facts 'market=US' is not a JSON object: write it as '{\"market\": \"US\"}'",
    ),
    Case(
        "--as-of without a time zone",
        ["fact", "user:42", "plan", "--store", "store", "--as-of", "2026-12-01T10:00", *AS],
        "memlake: ValidationError: --as-of 2026-12-01T10:00 has no time zone: write 2026-12-01T10:00Z for UTC, "
        "or add an offset such as +02:00",
    ),
    Case(
        "--as-of that is not a time",
        ["fact", "user:42", "plan", "--store", "store", "--as-of", "yesterday", *AS],
        "memlake: ValidationError: --as-of 'yesterday' is not a date or time: write 2026-12-01 (midnight UTC) "
        "or 2026-12-01T09:30:00Z",
    ),
    Case(
        "a replayed decision without decided_at",
        ["replay", "--store", "store", *AS],
        "memlake: ValidationError: stdin line 1: a decision needs decided_at",
        stdin=b'{"decision_id": "d1", "query": "plan?"}\n',
    ),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a store with one record in it, copied for each case."""
    root = tmp_path_factory.mktemp("template")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert main(["init", "--store", "store"]) == 0
        src = root / "seed.jsonl"
        src.write_bytes(jsonl(GOOD))
        assert main(["write", "--store", "store", "--file", str(src), *AS]) == 0
        src.unlink()
    finally:
        os.chdir(cwd)
    return root


def files(root: Path) -> dict[str, bytes | None]:
    """Every path under *root*: a file's bytes, None for a directory."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def run_case(
    case: Case, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(case.stdin or b""), encoding="utf-8"))
    capsys.readouterr()
    code = main(case.argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=[c.tried for c in CASES])
def test_bad_input_prints_the_documented_line_exits_2_and_changes_no_file(
    case, template, tmp_path, monkeypatch, capsys
):
    root = tmp_path / "data"
    shutil.copytree(template, root)
    for name, data in case.files.items():
        (root / name).write_bytes(data)
    if case.setup is not None:
        case.setup(monkeypatch, root)
    before = files(root)
    code, out, err = run_case(case, root, monkeypatch, capsys)
    monkeypatch.undo()
    message = err.replace(str(root), "/data")
    assert (code, out, message) == (2, "", case.message + "\n")
    assert files(root) == before
    assert f"`{case.message}`" in DOC.read_text(encoding="utf-8")


def _doc_rows() -> list[list[str]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and "memlake:" in line:
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))])
    return rows


def test_every_row_of_the_bad_input_table_is_a_case_that_is_run():
    rows = _doc_rows()
    assert all(exit_code == "2" and on_disk.startswith("unchanged") for *_, exit_code, on_disk in rows)
    documented = sorted((tried, message.strip("`")) for tried, _command, message, *_ in rows)
    assert documented == sorted((c.tried, c.message) for c in CASES)


def test_a_store_that_is_read_but_does_not_exist_is_not_created(tmp_path, capsys):
    assert main(["recall", "plan", "--store", str(tmp_path / "nowhere"), *AS]) == 2
    assert not (tmp_path / "nowhere").exists()
    assert "does not exist" in capsys.readouterr().err


def test_as_of_a_date_alone_is_midnight_utc(template, tmp_path, monkeypatch, capsys):
    root = tmp_path / "data"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    assert main(["fact", "user:42", "plan", "--store", "store", "--as-of", "2026-08-31", *AS]) == 0
    assert "nothing visible" in capsys.readouterr().out  # written valid from Sept 1, 09:00
    assert main(["fact", "user:42", "plan", "--store", "store", "--valid-at", "2026-09-02", "--json", *AS]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == "Pro"


def test_a_preference_ttl_of_30d_is_thirty_days(template, tmp_path, monkeypatch, capsys):
    from datetime import timedelta

    from memory_lakehouse.records import Preference, from_dict

    record = {**GOOD, "kind": "preference", "attribute": "language", "value": "en", "ttl": "30d"}
    month, half_day = from_dict(record), from_dict({**record, "ttl": "12h"})
    assert isinstance(month, Preference) and isinstance(half_day, Preference)
    assert month.ttl == timedelta(days=30)
    assert half_day.ttl == timedelta(hours=12)
    root = tmp_path / "data"
    shutil.copytree(template, root)
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(jsonl(record)), encoding="utf-8"))
    assert main(["write", "--store", "store", "--json", *AS]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["inserted"] == 1


def test_an_unexpected_error_is_not_swallowed_as_one_line(monkeypatch, tmp_path):
    import memory_lakehouse.cli.app as cli

    def boom(args: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(cli, "cmd_init", boom)
    with pytest.raises(TypeError):
        main(["init", "--store", str(tmp_path / "s")])
