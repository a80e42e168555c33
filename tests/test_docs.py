"""The README is tested against the code: its quick start runs and every command is documented."""

import re
import shlex
from pathlib import Path

from _support import present

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
    assert commands is not None
    for name in commands:
        assert f"memlake {name}" in README, f"`memlake {name}` is not in README.md"


def test_the_readme_quick_start_runs(tmp_path, monkeypatch, capsys):
    code = present(re.search(r"## Quick start\s+```python\n(.*?)```", README, re.S)).group(1)
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


def _cli_block() -> str:
    return present(re.search(r"## Command line.*?```sh\n(.*?)```", README, re.S)).group(1)


def _as_checked_script(block: str) -> str:
    """The README's shell block as a bash script that checks each ``# -> text`` claim."""
    lines, pending = [], ""
    for raw in block.splitlines():
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        command, _, claim = line.partition("# -> ")
        if not command.strip() or command.lstrip().startswith("#"):
            continue
        if claim:
            label = shlex.quote(command.strip()[:70])
            lines.append(f'out=$({command.strip()} 2>&1) || {{ echo FAILED: {label}; echo "$out"; exit 1; }}')
            lines.append(
                f'grep -qF -- {shlex.quote(claim.strip())} <<<"$out" || '
                f'{{ echo CLAIM NOT MET: {shlex.quote(claim.strip())} {label}; echo "$out"; exit 1; }}'
            )
        else:
            lines.append(command.strip())
    return "set -euo pipefail\n" + "\n".join(lines) + "\n"


def test_the_readme_cli_examples_run_and_print_what_they_claim(tmp_path):
    import os
    import subprocess
    import sys

    block = _cli_block()
    assert block.count("# -> ") >= 15
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLAKE_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    run = subprocess.run(
        ["bash", "-c", _as_checked_script(block)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_cli_command_appears_in_the_readme_with_a_working_help():
    import subprocess
    import sys

    from memory_lakehouse.cli import main

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None
    for name in commands:
        try:
            main([name, "--help"])
        except SystemExit as exit_:
            assert exit_.code == 0, name
    assert subprocess.run(
        [sys.executable, "-m", "memory_lakehouse.cli", "--version"], capture_output=True, text=True
    ).stdout.startswith("memlake ")


def test_the_readme_langgraph_example_runs_and_prints_what_it_claims(tmp_path, monkeypatch, capsys):
    import pytest

    pytest.importorskip("langgraph")
    code = present(re.search(r"## Integrations.*?```python\n(.*?)```", README, re.S)).group(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ml, "open", _open_with_hashing(ml.open))
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out.splitlines()
    assert out == ["{'likes': 'pizza'}", "['food']"]


def test_the_langgraph_agent_script_passes_its_checks(tmp_path):
    import importlib.util

    import pytest

    pytest.importorskip("langgraph")
    spec = importlib.util.spec_from_file_location("langgraph_agent", ROOT / "scripts" / "langgraph_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--store", str(tmp_path / "s")]) == 0
