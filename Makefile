# The README's commands. Each creates .venv on first use and installs only what it needs:
# `make zoo` the compiler alone (seconds), `make test` the runtime (torch, triton) and the
# test tools as well.
PY ?= python3
VENV := .venv
BASE := $(VENV)/.base
STAMP := $(VENV)/.installed
NODE_STAMP := editors/vscode/node_modules/.installed

.PHONY: zoo test test-fast test-all lint test-cuda
zoo: $(BASE)
	$(VENV)/bin/tribuild build

# `make test`: every test but the slow families (tests marked `slow`, and those tests/conftest.py
# marks by path: training runs, kill-point runs, torch.distributed, the Triton interpreter,
# the real Redis server), which `make test-all` adds and CI runs (.ci/run); property tests try
# a quarter of their examples without the slow ones (tests/budget.py), all of them in
# `make test-all`. `make test-fast`: the compiler's own tests (no torch), for the inner loop.
test: $(STAMP) $(NODE_STAMP)
	$(VENV)/bin/python -m pytest -n 2 -q -m "not slow"

test-all: $(STAMP) $(NODE_STAMP)
	$(VENV)/bin/python -m pytest -n 2 -q

FAST_TESTS := tests/base tests/config tests/engine tests/lang tests/ir tests/queries
test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 -q -m "not slow" $(FAST_TESTS)

# Style, lint and types (ruff and mypy, configured in pyproject.toml; both come with the dev
# extra). mypy checks tribuild/, strictly in engine, ir, codegen, remote, the driver and the
# runtime (the modules pyproject.toml lists; the Triton kernels' parameters stay unannotated).
LINTED := tribuild tests benchmarks
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

# On a machine with a CUDA GPU, torch and triton (not part of `make test`): the kernel and
# generated-module tests through Triton's compiler instead of its interpreter (tests/device.py).
CUDA_TESTS := $(wildcard tests/runtime/test_kernels_*.py) tests/runtime/test_custom_ops.py \
	tests/codegen/test_kernel_files.py \
	tests/codegen/test_zoo_modules.py
test-cuda:
	TRIBUILD_TEST_DEVICE=cuda $(PY) -m pytest -q $(ARGS) $(CUDA_TESTS)

# The VS Code extension's npm packages, for the grammar test (tests/editors); without npm
# that test is skipped (CI installs node: .ci/run).
$(NODE_STAMP): editors/vscode/package.json editors/vscode/package-lock.json
	@if command -v npm >/dev/null; then \
		cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else echo "npm not found: the grammar test (tests/editors) will be skipped"; fi

$(BASE): pyproject.toml
	@echo "make: installing tribuild (the compiler alone: networkx, rich, watchdog) into $(VENV)"
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -e .
	touch $(BASE)

$(STAMP): $(BASE) pyproject.toml constraints.txt
	@echo "make: installing the runtime (torch, triton), safetensors for LM checkpoints, the remote cache's client (redis), the language server (pygls), the exporters (onnx), scikit-learn for the examples and the test tools (transformers, the LM tests' reference) into $(VENV)"
	$(VENV)/bin/pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev,runtime,gpu,remote,lsp,export,examples,lm,reference]'
	touch $(STAMP)
