# The two README commands. Each creates .venv on first use and installs what it needs.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: zoo test test-cuda
zoo: $(STAMP)
	$(VENV)/bin/tribuild build

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 -q

# On a machine with a CUDA GPU, torch and triton (not part of `make test`): the kernel and
# generated-module tests through Triton's compiler instead of its interpreter (tests/device.py).
CUDA_TESTS := $(wildcard tests/gpu/test_kernels_*.py) tests/codegen/test_kernel_files.py \
	tests/codegen/test_zoo_modules.py
test-cuda:
	TRIBUILD_TEST_DEVICE=cuda $(PY) -m pytest -q $(ARGS) $(CUDA_TESTS)

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[dev,runtime,gpu]' --config-settings editable_mode=compat
	touch $(STAMP)
