# The two commands: `make demo` (the main job on an embedded default) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
SOURCES := operator tests examples benchmarks setup.py build_backend.py

.PHONY: demo test lint unit e2e image realnodes bootstrap bench generate clean

demo:
	scripts/bootstrap.sh
	$(PY) -m fabriccap demo

test:
	scripts/bootstrap.sh --test
	$(MAKE) --no-print-directory lint
	$(PY) -m pytest -ra -p no:cacheprovider

# Style, types and the layer contracts (import-linter; see [tool.importlinter] in pyproject.toml).
lint:
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Every generated or copied file (alert rules, dashboard, CRD copies...); a unit test fails when one is stale.
generate:
	$(VENV)/bin/fabriccap-dev generate

unit:
	$(PY) -m pytest -q tests/unit

e2e:
	$(PY) -m pytest -q tests/e2e

# The operator image without Docker (root): dist/fabriccap-<version>.oci.tar, .digest and
# .spdx.json; prints the digest. See docs/install.md.
image:
	scripts/build-image.sh

# Real kubelets with containerd (root): docs/real-nodes.md.
realnodes:
	$(PY) -m pytest -q -m realnodes tests/e2e

bootstrap:
	scripts/bootstrap.sh --test

bench:
	$(PY) benchmarks/evaluate_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
