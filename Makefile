# neuron-mlir developer entry points. `make help` lists them.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Both cores by default; PYTEST_WORKERS=0 runs in-process (easier debugging).
PYTEST_WORKERS ?= 2

.DEFAULT_GOAL := help
.PHONY: help venv test pytest lit lint typecheck demo bench models model-sweep clean importer-coverage coverage fuzz

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (set PYTHON=...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch is pinned exactly (pyproject.toml) so pip takes the CPU wheel, never a CUDA build.
	$(PY) -m pip install --quiet -e ".[test]"
	@# the device's native hooks (storage resize, generators, pinned memory): compiled once, cached
	@# without the device's autoload: `import torch` would load the half-imported package it is building for
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(PY) -m neuron_mlir.frontend.device.native || echo "warning: the neuron device's native hooks did not build"
	touch $(STAMP)

venv: $(STAMP)  ## create .venv and install neuron-mlir with its test tools

test: pytest lit  ## everything CI runs: pytest, then lit/FileCheck

pytest: $(STAMP)  ## the pytest suite (unit, numeric end-to-end, models)
	@# pytest exits 5 when it collects nothing: that is a broken suite, never a pass.
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal --durations=20 test; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests"; exit 1; fi; exit $$rc

lit: $(STAMP)  ## the lit/FileCheck suite in test/lit
	$(VENV)/bin/lit -sv test/lit

lint: $(STAMP)  ## ruff (lint and formatting), then the type checker (mypy, as `make typecheck`)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m neuron_mlir.tools.typecheck

typecheck: $(STAMP)  ## mypy over the packages, tests, bench and examples (configured in pyproject.toml)
	$(PY) -m neuron_mlir.tools.typecheck

importer-coverage: $(STAMP)  ## sweep PyTorch's OpInfo database through the importer -> docs/importer-coverage.md
	$(PY) -m neuron_mlir.tools.opinfo_sweep --jobs $(PYTEST_WORKERS) --output docs/importer-coverage.md

coverage: $(STAMP)  ## compile and compare op_db samples through the backend (cached per entry) -> docs/coverage.md
	$(PY) -m neuron_mlir.tools.coverage_sweep --jobs $(PYTEST_WORKERS) --output docs/coverage.md

demo: $(STAMP)  ## train on the neuron device; compile and train an MLP and a small GPT-2, next to eager
	$(PY) examples/train_on_device.py
	@echo
	$(PY) examples/train_mlp.py
	@echo
	$(PY) examples/train_transformer.py

bench: $(STAMP)  ## generated code vs roofline, compile time vs Inductor, auto_cast modes, simulator, the device (bench/)
	-$(PY) bench/bench_kernels.py
	@echo
	$(PY) bench/bench_models.py
	@echo
	$(PY) bench/bench_auto_cast.py
	@echo
	$(PY) bench/bench_simulator.py
	@echo
	$(PY) bench/bench_device.py
	@echo
	$(PY) bench/bench_dynamic_shapes.py
	@echo
	$(PY) bench/bench_data_dependent.py

# One model at a time: each takes minutes and several GiB on the simulator. The tests run each case in a fresh
# process of their own (so no xdist worker is needed) and end with each case's peak resident memory.
models: $(STAMP)  ## the real-width model set: compile, step and simulated times -> docs/models.md, then its tests
	$(PY) bench/bench_real_width.py --output docs/models.md
	@echo
	$(PY) -m pytest -q -n 0 --real-width test/models/test_real_width_models.py

# A process per class (timeout, memory limit), results cached per class in build/model-sweep and recorded in
# docs/model-sweep.jsonl: an interrupted sweep continues, here or on another machine (results of older sources
# count with MODEL_SWEEP_ARGS=--reuse-stale). One class at a time by default (MODEL_SWEEP_JOBS); hours for all.
MODEL_SWEEP_JOBS ?= 1
MODEL_SWEEP_ARGS ?=
model-sweep: $(STAMP)  ## every transformers model class, tiny, vs eager and aot_eager -> docs/models.md
	$(PY) -m neuron_mlir.tools.model_sweep --jobs $(MODEL_SWEEP_JOBS) $(MODEL_SWEEP_ARGS) \
		--results docs/model-sweep.jsonl --output docs/models.md

# Failing inputs (and their tracebacks) land in build/fuzz; the first input of each crash site is minimised.
fuzz: $(STAMP)  ## 10,000 mutated inputs through neuron-opt: accepted, diagnosed, crashes and hangs
	$(PY) -m neuron_mlir.tools.fuzz_neuron_opt --cases 10000 --jobs $(PYTEST_WORKERS) --save-dir build/fuzz --minimize

clean:  ## remove the virtual environment and caches
	rm -rf $(VENV) build *.egg-info .pytest_cache
