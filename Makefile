# The two commands a newcomer needs: `make demo` and `make test`.
# Each sets everything up on first use (venv from pyproject.toml, Kafka jars
# from Maven Central, Toxiproxy from the Go module proxy) and is a no-op after.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: setup demo test test-fast bench clean

setup: $(STAMP)
	@$(BIN)/chaos setup

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'
	@rm -f $(VENV)/.installed-* && touch $@

demo: setup
	$(BIN)/chaos demo --out out/demo

test: setup
	$(BIN)/python -m pytest

test-fast: setup
	$(BIN)/python -m pytest -m "not integration"

bench: setup
	$(BIN)/python bench/cluster_start.py

clean:
	rm -rf $(VENV) out
