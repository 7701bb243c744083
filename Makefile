# Two entry points, each creating .venv on first use: `make demo` and `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin
DEMO_DB ?= out/demo.duckdb
DEMO_CONFIG ?= sample_logs/property.toml

.PHONY: demo demo-live test test-fast bench bench-false-alarms bench-replay bench-scale bench-fuzz bench-live bench-integrity bench-backfill bench-history bench-odd-input sample clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The main job on the sample night, into a fresh database: ingest, audit, list the findings,
# render the grave shift's PDF. `ingest` and `audit` exit 1 because the sample holds planted
# deviations; that is expected here.
demo: $(BIN)/.installed
	mkdir -p out && rm -f $(DEMO_DB)
	$(BIN)/bacc-audit ingest sample_logs/ --db $(DEMO_DB) || [ $$? -eq 1 ]
	$(BIN)/bacc-audit audit --db $(DEMO_DB) --config $(DEMO_CONFIG) || [ $$? -eq 1 ]
	$(BIN)/bacc-audit findings --db $(DEMO_DB) --config $(DEMO_CONFIG) --format table
	$(BIN)/bacc-audit report --db $(DEMO_DB) --config $(DEMO_CONFIG) \
	  --shift 2026-11-28/grave --out out/2026-11-28_grave.pdf

# The live audit without tables (docs/live.md): `watch` and its board on a free port, fed a
# simulated night by `simulate --live` at 60 times its pace; prints the board's URL, Ctrl-C
# stops both. SPEED=600 TABLES=8 HOURS=9 change the night (scripts/demo_live.py).
demo-live: $(BIN)/.installed
	$(BIN)/python scripts/demo_live.py

# Every test: on every core (pytest-xdist), with mypy beside them at the lowest priority (one
# core's ~16 s, taken from the moments a worker waits rather than from the tests; its verdict
# is printed after theirs), then the realtime ones, two files at a time, so that no test
# outside them loads the machine while they time it (pyproject.toml lists the markers; two
# at a time took 32-33 s against 47-48 s one at a time, and passed with two busy loops
# beside them: docs/benchmarks.md, session 61). The realtime run collects only the files
# that mark a test realtime (about 5 s less than collecting every file).
# Python may keep compiled modules (pytest's assertion-rewritten test modules among them) even
# where the environment says not to (PYTHONDONTWRITEBYTECODE): every worker and every command a
# test starts compiles them again otherwise, ~9 s of a run's collection alone (__pycache__ is
# ignored by git and left out of the wheel).
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -p no:cacheprovider
XDIST ?= -n auto --dist worksteal
REALTIME_FILES = $(shell grep -rl --include='test_*.py' 'mark.realtime' tests)
test: $(BIN)/.installed
	$(BIN)/ruff check .
	nice -n 19 $(BIN)/mypy > $(VENV)/mypy.out 2>&1 & typing=$$!; \
	$(PYTEST) $(XDIST) -m "not realtime"; tests=$$?; \
	wait $$typing; typed=$$?; cat $(VENV)/mypy.out; \
	test $$tests -eq 0 && test $$typed -eq 0
	$(PYTEST) -n 2 --dist loadfile -m realtime $(REALTIME_FILES)

# The quick loop: all but the slow, statistical, realtime and cluster tests.
test-fast: $(BIN)/.installed
	$(PYTEST) $(XDIST) -m "not (slow or stats or realtime or cluster)"

# Speed figures (not tests): see docs/benchmarks.md. bench/replay.py builds a 1M-round
# database on its first run (about 8 minutes), so it is separate: make bench-replay.
bench: $(BIN)/.installed
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/report.py

# The false-alarm rates on 100 clean nights (tests/audit/test_false_alarms.py runs 10): a few
# minutes.
bench-false-alarms: $(BIN)/.installed
	$(BIN)/python bench/false_alarms.py

bench-replay: $(BIN)/.installed
	$(BIN)/python bench/replay.py

# A whole gaming day of 10M rounds: about 30 GB of logs under bench/out/scale, ~30 minutes.
bench-scale: $(BIN)/.installed
	$(BIN)/python bench/scale.py --rounds 10000000 --memory-limit 2.5GB

# The fuzz suite at full size: 110,000 bad lines of every kind and hostile files (a 1 GB gzip
# bomb, a 200 MB line) among 440,000 good lines, under a 1 GB memory cap; about 2 GB of disk.
# Live watch latency and cost at 500 tables (docs/benchmarks.md): about 3 minutes.
bench-live: $(BIN)/.installed
	$(BIN)/python bench/live.py

# The shoe-integrity search against a year of shoes at 100 tables (docs/shoe-integrity.md):
# builds a ~4 GB index under bench/out on its first run (about 5 minutes).
bench-integrity: $(BIN)/.installed
	$(BIN)/python bench/integrity.py

# The fuzz tests of every command's options and every board route (issue 31) with many more
# draws than in the suite: about 10 minutes at the defaults.
bench-odd-input: $(BIN)/.installed
	$(BIN)/python bench/odd_input.py

bench-fuzz: $(BIN)/.installed
	$(BIN)/python bench/fuzz.py

# backfill on a local Dask cluster, 1 worker against 2, and the year estimate: 64 tables' day
# (320 MB of logs under bench/out/), a few minutes.
bench-backfill: $(BIN)/.installed
	$(BIN)/python bench/backfill.py

# The nightly audit as the database's history grows (issue 32): 24 days of 12 tables ingested
# and audited one day at a time (logs cached under bench/out/); about 8 minutes.
bench-history: $(BIN)/.installed
	$(BIN)/python bench/history.py

# Regenerate sample_logs/ from the simulator (deterministic: same seed, same bytes).
sample: $(BIN)/.installed
	rm -f sample_logs/*.jsonl sample_logs/*.jsonl.gz
	$(BIN)/python -m auditor.simulate.sample sample_logs

clean:
	rm -rf $(VENV) out reports/out
