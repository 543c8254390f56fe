# The two commands of the README. Everything they need is installed here.
PYTHON ?= python3
SHELL := bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast venv clean

venv: $(STAMP)

# pip's output (setuptools' "Editable installation" warning prints through -q) goes to a log,
# shown only when the install fails.
PIP_LOG := $(VENV)/pip-install.log
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@echo "==> pip install -e '.[build,dev,bench]' into $(VENV) (log: $(PIP_LOG))"
	@{ $(BIN)/python -m pip install --upgrade pip && $(BIN)/python -m pip install -e '.[build,dev,bench]'; } \
		> $(PIP_LOG) 2>&1 || { cat $(PIP_LOG); exit 1; }
	touch $(STAMP)

# The main job on the bundled examples. `tfcheck check` exits 1 when it finds something (expected
# here: fixtures/lint is full of pitfalls); only 2, an error, stops the demo.
demo: export TF_CPP_MIN_LOG_LEVEL = 2
# TensorFlow's C++ start-up lines (absl, oneDNN) print before TF_CPP_MIN_LOG_LEVEL is read; the
# dispatch example imports TensorFlow in its own process, so the demo drops exactly those lines.
TF_STARTUP_NOISE := absl::InitializeLog\|oneDNN custom operations are on
demo: $(STAMP)
	@echo "==> tfcheck check --statistics fixtures/        (lint: tf.function pitfalls, never running the code; the default rules)"
	@$(BIN)/tfcheck check --statistics fixtures/; test $$? -le 1
	@echo
	@echo "==> tfcheck build fixtures/aot/mlp.py --out .tfcheck/demo   (trace, freeze, compile with TVM, verify, cache)"
	@$(BIN)/tfcheck build fixtures/aot/mlp.py --out .tfcheck/demo
	@echo
	@echo "==> python examples/serve_mlp.py .tfcheck/demo   (production: load the artifact without TensorFlow)"
	@$(BIN)/python examples/serve_mlp.py .tfcheck/demo
	@echo
	@echo "==> python examples/dispatch_mlp.py   (calling the @tfcheck.aot function runs its artifact)"
	@set -o pipefail; $(BIN)/python examples/dispatch_mlp.py 2>&1 | grep -v -e "$(TF_STARTUP_NOISE)"

# The schedule tests run a second time as on an AVX2-only CPU (benchmarks/avx2_only/run.py masks
# CPUID), so that every decision they check is seen to follow the target, not this machine's ISA; it
# needs Linux's CPUID faulting, which some machines lack: then it says so and is skipped. A CPU
# without AVX-512 ran them as an AVX2-only CPU already.
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup
	@if ! grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
		echo "==> tests/schedules ran on a CPU without AVX-512: no second run as on an AVX2-only CPU"; \
	elif grep -qw cpuid_fault /proc/cpuinfo 2>/dev/null; then \
		echo "==> tests/schedules as on an AVX2-only CPU (benchmarks/avx2_only/run.py)"; \
		$(BIN)/python benchmarks/avx2_only/run.py -- $(BIN)/python -m pytest -q -n 2 -p no:cacheprovider tests/schedules; \
	else echo "==> skipped: tests/schedules as on an AVX2-only CPU (no CPUID faulting on this machine)"; fi

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not slow"

clean:
	rm -rf $(VENV) .tfcheck_cache .tfcheck build *.egg-info
