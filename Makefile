# The two commands: `make demo` (the main job on an embedded default) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint unit e2e bootstrap bench clean

demo:
	scripts/bootstrap.sh
	$(PY) -m fabriccap demo

test:
	scripts/bootstrap.sh --test
	$(VENV)/bin/ruff check operator tests examples benchmarks
	$(VENV)/bin/ruff format --check operator
	$(VENV)/bin/mypy
	$(PY) -m pytest -ra -p no:cacheprovider

lint:
	$(VENV)/bin/ruff check operator tests examples benchmarks
	$(VENV)/bin/mypy

unit:
	$(PY) -m pytest -q tests/unit

e2e:
	$(PY) -m pytest -q tests/e2e

bootstrap:
	scripts/bootstrap.sh --test

bench:
	$(PY) benchmarks/evaluate_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
