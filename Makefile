# The README's two commands. Each creates .venv when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run docs test test-fast microbench lint clean joeynmt

# Bytecode is written as Python writes it by default, by the first process that imports a
# module: a run imports about a quarter of the venv's 18,000 files, and compiling all of them
# at install took 28 s on 2 cores. Where PYTHONDONTWRITEBYTECODE is set, Python writes none
# and every process compiles each module it imports again (about 0.5 s of CPU each, for the
# hundreds of processes the tests start): the commands below run without it.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -e '.[dev]'
	touch $(STAMP)

# Under results/: first the expected time of what follows (`tvr estimate`: the reference rows'
# point time, scaled to this machine), then the quick complexity sweep and crossover, Table 1
# measured, the quick convergence and ablation studies, residual branches through depth at
# initialisation (seconds), the paper's exact identities (seconds), each layer on 1..all
# threads (threads, seconds), Table 2 of translation in miniature, then
# results/REPORT.md with every table, figure and the claims ledger. Nothing outside results/
# is written: README.md and docs/ are the project's (`make docs`). rematch-quick (later work:
# scanned recurrences' throughput, MQAR against state size) is left out to keep this within 20
# minutes of reference point time: `tvr run rematch-quick --executor ray`, its time in README.
# The training suites run one point per core (`--executor ray`, a Ray instance on this
# machine): each point trains its small model on one thread, so one point at a time would
# leave the other cores idle. The timed layer suites run one point at a time.
run: $(STAMP)
	$(BIN)/tvr estimate
	$(BIN)/tvr run quick
	$(BIN)/tvr run table1
	$(BIN)/tvr run convergence-quick --executor ray
	$(BIN)/tvr run residual
	$(BIN)/tvr run identities
	$(BIN)/tvr run threads
	$(BIN)/tvr run translation-quick --executor ray
	$(BIN)/tvr report

# The generated blocks of README.md and docs/ (measured numbers, the CLI reference, the suite
# list) from the results under results/, with REPORT.md: the project's pages, refreshed when
# the committed results or the commands change (a test fails while they are stale).
docs: $(STAMP)
	$(BIN)/tvr report --docs

# Every test, one pytest-xdist worker per core (tests/conftest.py keeps a module whose tests
# share a server or cluster on one worker, and gives each worker and the processes it starts
# their share of the cores' threads); the ten slowest are listed at the end.
test: $(STAMP)
	$(BIN)/lint-imports
	MPLBACKEND=Agg $(BIN)/pytest -q -n auto --dist loadgroup --durations=10

# The inner loop: the tests not marked slow (pyproject.toml's markers: no training runs, real
# processes or servers, browsers, Ray clusters, fuzzers or whole suites): about two minutes on
# 2 idle cores. `make test` runs them too, with the slow ones.
test-fast: $(STAMP)
	$(BIN)/lint-imports
	MPLBACKEND=Agg $(BIN)/pytest -q -n auto --dist loadgroup -m "not slow" --durations=5

# The third-party toolkit of the Table 2 cross-check (scripts/anchor), in a venv of its own:
# its protobuf pin conflicts with MLflow's; JoeyNMT 2.3.0 passes ReduceLROnPlateau a
# `verbose` that torch 2.7 removed, and imports importlib_metadata without requiring it.
# The tests that train it skip where it is missing; .ci/run installs it.
JOEY := .venv-joeynmt
joeynmt: $(JOEY)/.installed
$(JOEY)/.installed:
	test -x $(JOEY)/bin/pip || $(PY) -m venv --clear $(JOEY)
	$(JOEY)/bin/pip install -q joeynmt==2.3.0 torch==2.5.1 importlib-metadata
	touch $@

microbench: $(STAMP)
	$(BIN)/pytest -q tests/microbench --benchmark-only --benchmark-autosave

lint: $(STAMP)
	$(BIN)/ruff check models harness experiments tests

clean:
	rm -rf $(VENV) $(JOEY) .pytest_cache .ruff_cache .benchmarks
