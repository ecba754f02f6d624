# The README's two commands. Each creates .venv when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test microbench lint clean bytecode

# pip compiles the installed packages' bytecode one file after another (about 35 s of the
# install here, most of it torch's); compileall does it on every core. A file this Python
# cannot parse (torch ships a 3.12-only test helper) stays uncompiled, as pip leaves it.
$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -e '.[dev]'
	$(BIN)/python -c 'import compileall, sys; compileall.compile_dir(sys.argv[1], quiet=2, workers=0)' $(VENV)/lib
	touch $(STAMP)

# The project's own bytecode, compiled before the many processes a run or the tests start:
# where PYTHONDONTWRITEBYTECODE is set (this machine sets it) Python writes none itself, and
# each process compiled every module it imported again (about 0.5 s of CPU each).
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 models harness experiments tests

# Under results/: the quick complexity sweep and crossover, Table 1 measured, the quick
# convergence and ablation studies, the paper's exact identities (seconds), each layer on
# 1..all threads (threads, seconds), Table 2 of translation in miniature, the rematch (later
# work: scanned recurrences' throughput, MQAR against state size), then REPORT.md
# with every table, figure and the claims ledger, and the generated blocks of README.md and
# docs/.
# The training suites run one point per core (`--executor ray`, a Ray instance on this
# machine): each point trains its small model on one thread, so one point at a time would
# leave the other cores idle. The timed layer suites run one point at a time.
run: $(STAMP) bytecode
	$(BIN)/tvr run quick
	$(BIN)/tvr run table1
	$(BIN)/tvr run convergence-quick --executor ray
	$(BIN)/tvr run identities
	$(BIN)/tvr run threads
	$(BIN)/tvr run translation-quick --executor ray
	$(BIN)/tvr run rematch-quick --executor ray
	$(BIN)/tvr report

# Every test, one pytest-xdist worker per core (tests/conftest.py keeps a module whose tests
# share a server or cluster on one worker); the ten slowest are listed at the end.
test: $(STAMP) bytecode
	$(BIN)/lint-imports
	MPLBACKEND=Agg $(BIN)/pytest -q -n auto --dist loadgroup --durations=10

microbench: $(STAMP)
	$(BIN)/pytest -q tests/microbench --benchmark-only --benchmark-autosave

lint: $(STAMP)
	$(BIN)/ruff check models harness experiments tests

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .benchmarks
