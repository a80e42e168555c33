"""The README is tested against the code: its quick start runs and every command is documented."""

import re
from pathlib import Path

import memory_lakehouse as ml
from memory_lakehouse.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_opens_with_the_two_setup_commands():
    head = README.split("## ")[0]
    assert "make demo" in head and "make test" in head


def test_every_cli_command_is_documented_in_the_readme():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in commands:
        assert f"memlake {name}" in README, f"`memlake {name}` is not in README.md"


def test_the_readme_quick_start_runs(tmp_path, monkeypatch, capsys):
    code = re.search(r"## Quick start\s+```python\n(.*?)```", README, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ml, "open", _open_with_hashing(ml.open))
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "superseded" in out and "Enterprise Pro" in out and "Free Starter" in out
    assert "verified: no erased value left" in out


def _open_with_hashing(real_open):
    def opener(path, **kw):  # the README's recall works with any embedder; keep the test fast
        kw.setdefault("embedder", ml.HashingEmbedder())
        return real_open(path, **kw)
    return opener
