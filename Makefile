# Two commands: `make demo` (the main job on the embedded defaults) and `make test`.
PYTHON ?= python3
VENV ?= .venv
EXTRAS ?= dev,gateway,clickhouse,eval,train,examples,sandboxes
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install demo test test-unit lint typecheck perf down clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-$(EXTRAS): pyproject.toml | $(BIN)/activate
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	$(BIN)/pip install -q ./native/avrofast
	$(BIN)/pip check
	@touch $@

install: $(VENV)/.installed-$(EXTRAS)

# The main job: the whole local stack on the embedded defaults (the local model server on
# SmolLM2-135M-Instruct, fetched on first use), 20 HumanEval tasks through the gateway, the
# run's pass@k from the history, and `down` whatever happens.
demo: install
	@set -e; trap '$(BIN)/rllm-cli down' EXIT; \
	$(BIN)/rllm-cli up; \
	$(BIN)/rllm-cli eval humaneval --model local --max-examples 20 --max-tokens 256; \
	sleep 5; \
	$(BIN)/rllm-cli analytics passk

test: install
	bash infra/run-tests $(PYTEST_ARGS)

test-unit: install
	$(BIN)/python -m pytest tests/unit -q $(PYTEST_ARGS)

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
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
