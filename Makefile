# Two commands: `make demo` (the main job on the embedded defaults) and `make test`. Both
# install the Debian packages they need first (`system`: infra/setup-system, a no-op once
# they are there), then the venv (`install`); lint and typecheck need the venv only.
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= dev,gateway,clickhouse,eval,train,examples,sandboxes,tinker,fireworks
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Tests import rllm in hundreds of subprocesses: let Python keep its bytecode cache even
# where the environment turns it off (an empty value means unset).
export PYTHONDONTWRITEBYTECODE :=

.PHONY: system install demo demo-agent demo-humaneval test test-unit test-verl lint typecheck perf down clean

# Prerequisites run in the order written (system packages before the venv builds the
# native codec against Python.h with gcc), also under -j.
.NOTPARALLEL:

system:
	@PYTHON=$(PYTHON) bash infra/setup-system

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-$(EXTRAS): pyproject.toml | $(BIN)/activate
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	$(BIN)/pip install -q ./native/avrofast
	$(BIN)/pip check
	@touch $@

install: $(VENV)/.installed-$(EXTRAS)

# The main job: `rllm-cli demo` starts the local stack on the embedded defaults (the local
# model server on SmolLM2-135M-Instruct, fetched on first use), evaluates it on 20 held-out
# `multiply` tasks, trains it with RL through the whole pipeline, evaluates it again, prints
# before -> after and the reward curve's PNG, and stops the stack whatever happens. The
# HumanEval run it used to be is `make demo-humaneval`.
demo: system install
	$(BIN)/rllm-cli demo

# The same through a harness: SmolLM2-135M learns generated shell tasks (`rllm-cli bench gen
# shell-basics`: write a number into a file, count files, rename one, ...) through the `bash`
# harness in local sandboxes, rewarded by each task's verifier; held-out before -> after.
demo-agent: system install
	$(BIN)/rllm-cli demo --agent bash

demo-humaneval: system install
	@set -e; trap '$(BIN)/rllm-cli down' EXIT; \
	$(BIN)/rllm-cli up; \
	$(BIN)/rllm-cli eval humaneval --model local --max-examples 20 --max-tokens 256; \
	sleep 5; \
	$(BIN)/rllm-cli analytics passk

test: system install
	bash infra/run-tests $(PYTEST_ARGS)

test-unit: install
	$(BIN)/python -m pytest tests/unit -q -n auto $(PYTEST_ARGS)

# tests/verl in a venv of its own: verl 0.9.1 needs transformers>=5.5.3,<5.11, the train
# extra pins <4.58 (tests/conftest.py keeps tests/verl out of `make test`). torch from the
# CPU index where it answers, else the default one; the project runs from this checkout
# (PYTHONPATH) with its core imports, and --noconftest leaves out the Kafka, gateway and
# sandbox fixtures this venv has no packages for.
VERL_VENV ?= .verl-venv
VERL_PACKAGES := verl==0.9.1 ray uvicorn fastapi pydantic-settings confluent-kafka>=2.6 \
	fastavro>=1.9 cramjam>=2.8 httpx>=0.27 rich>=13 pytest>=8 pytest-asyncio pytest-timeout

$(VERL_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/pip install -q --upgrade pip
	$(VERL_VENV)/bin/pip install -q --retries 0 --timeout 20 torch \
		--index-url https://download.pytorch.org/whl/cpu \
		|| $(VERL_VENV)/bin/pip install -q torch
	$(VERL_VENV)/bin/pip install -q $(foreach p,$(VERL_PACKAGES),"$(p)")
	$(VERL_VENV)/bin/pip check
	@touch $@

test-verl: $(VERL_VENV)/.installed
	PYTHONPATH=$(CURDIR) $(VERL_VENV)/bin/python -m pytest --noconftest tests/verl -q $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check rllm tests perf
	$(BIN)/ruff format --check rllm tests perf

typecheck: install
	$(BIN)/mypy

perf: install
	$(BIN)/python perf/codec.py

down:
	$(BIN)/rllm-cli down

clean:
	rm -rf $(VENV) $(VERL_VENV) .pytest_cache .mypy_cache .ruff_cache
