# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOME_DIR ?= ./var
PORT ?= 8501
API_PORT ?= 8000

.PHONY: install demo test bench lint clean system-deps image

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip==26.3"
	$(BIN)/python -m pip install -q -c constraints.txt --config-settings editable_mode=compat -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# Debian packages the tests need (a real Prometheus server and promtool; headless Chromium).
system-deps:
	@bash .ci/system-deps

# The container image, built from the Dockerfile with buildah (no daemon); see .ci/build-image for
# IMAGE= and BASE=. Prints the image name.
image: system-deps
	@bash .ci/build-image

GF := $(BIN)/gpufinops --home $(HOME_DIR)

# The demo fleet -> lake -> warehouse -> its FOCUS bill -> reconciled warehouse -> recommendations -> API + dashboards.
demo: install system-deps
	$(GF) demo
	$(GF) build --full
	$(GF) ingest billing --demo-bill $(HOME_DIR)/demo-focus-bill.csv
	$(GF) build
	$(GF) recommend --top 10
	$(GF) changes propose-top --count 4 --ticket DEMO-1 --as demo-recommender --role platform-admin
	$(GF) budgets check
	@echo "Serving the REST API on http://127.0.0.1:$(API_PORT)/docs and the dashboards on http://localhost:$(PORT) (Ctrl-C stops both)"
	@bash -c 'trap "kill 0" EXIT INT TERM; $(GF) serve api --demo --port $(API_PORT) & $(GF) serve dashboard --demo --port $(PORT)'

test: install system-deps
	$(BIN)/python -m pytest -q

bench: install system-deps
	$(BIN)/python -m bench.run

lint: install
	$(BIN)/ruff check gpufinops cli ingest exports transform recommender simulator changes controller api dashboards reports bench testsupport tests
	$(BIN)/mypy gpufinops ingest exports transform recommender simulator changes controller api dashboards reports cli

clean:
	rm -rf $(HOME_DIR) target dbt_packages logs
