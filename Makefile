# The two commands of the README. Everything they need is installed here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[build,dev,bench]'
	touch $(STAMP)

demo: $(STAMP)
	@$(BIN)/python -m tfcheck.demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not slow"

clean:
	rm -rf $(VENV) .tfcheck_cache .tfcheck build *.egg-info
