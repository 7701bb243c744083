# Two entry points, each creating .venv on first use: `make demo` and `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin
DEMO_DB ?= out/demo.duckdb

.PHONY: demo test lint bench sample clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# Ingest the sample night into a fresh database, then list what was found.
# `ingest` exits 1 because the sample holds a planted malformed line; that is expected.
demo: $(BIN)/.installed
	mkdir -p out && rm -f $(DEMO_DB)
	$(BIN)/bacc-audit ingest sample_logs/ --db $(DEMO_DB) || [ $$? -eq 1 ]
	$(BIN)/bacc-audit ingest sample_logs/ --db $(DEMO_DB) || [ $$? -eq 1 ]
	$(BIN)/bacc-audit findings --db $(DEMO_DB) --format table

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: $(BIN)/.installed
	$(BIN)/python bench/ingest.py

# Regenerate sample_logs/ from the simulator (deterministic: same seed, same bytes).
sample: $(BIN)/.installed
	rm -f sample_logs/*.jsonl sample_logs/*.jsonl.gz
	$(BIN)/python -m auditor.simulate sample_logs

clean:
	rm -rf $(VENV) out reports/out
