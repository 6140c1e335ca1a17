# The two README commands. Each creates .venv on first use and installs what it needs.
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: zoo test
zoo: $(STAMP)
	$(VENV)/bin/tribuild build

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 -q

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[dev,runtime,gpu]' --config-settings editable_mode=compat
	touch $(STAMP)
