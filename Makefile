# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STORE  ?= data/store

.PHONY: demo test venv dev clean bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.dev-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed
dev: $(VENV)/.dev-installed

demo: $(VENV)/.installed
	rm -rf $(STORE)
	$(PY) -m memory_lakehouse.cli demo --store $(STORE)/demo
	@for s in scripts/scenario_*.py; do \
		echo; echo "### $$s"; \
		$(PY) $$s --store $(STORE)/$$(basename $$s .py) || exit 1; \
	done

test: $(VENV)/.dev-installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	$(PY) scripts/bench.py

clean:
	rm -rf $(VENV) data/store .pytest_cache
