# allocmark: `make demo` runs the quick suite, `make test` runs lint and tests.
# Set-up steps leave stamp files in .venv, so a second run skips them.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_SYS := $(VENV)/.system-deps
STAMP_PKG := $(VENV)/.installed
STAMP_APPS := $(VENV)/.apps
SOURCES := pyproject.toml CMakeLists.txt $(shell find src native tests/native -type f \
             \( -name '*.py' -o -name '*.toml' -o -name '*.c' -o -name '*.h' -o -name '*.j2' -o -name '*.rs' -o -name '*.cpp' -o -name '*.rb' -o -name '*.lua' \) 2>/dev/null)

.PHONY: demo test lint setup install setup-apps bench faults neighbour docs clean

# Where `make setup` links the allocmark command: on PATH for root and for a user
# (Debian's ~/.profile adds ~/.local/bin once it exists).
PREFIX ?= $(if $(filter 0,$(shell id -u)),/usr/local,$(HOME)/.local)

# `make demo APPS=1` also installs the real applications and runs the apps suite.
demo: setup $(if $(APPS),setup-apps)
	$(BIN)/allocmark allocators
	$(BIN)/allocmark run --suite quick --db results/quick.db
	$(BIN)/allocmark report --db results/quick.db --format md -o results/quick.md
	$(BIN)/allocmark report --db results/quick.db --format csv -o results/quick.csv
	$(BIN)/allocmark try -a glibc,jemalloc,mimalloc --db results/try.db -- /usr/bin/python3 -c 'd = {i: str(i) * 8 for i in range(300000)}'
	$(if $(APPS),$(BIN)/allocmark run --suite apps --db results/apps.db)

# The tests run every application of the catalog, so they install them first.
test: setup setup-apps lint
	$(BIN)/python -m pytest -q --durations=15 tests

# The fault battery (also part of `make test`, with fewer trials), printing its figures.
faults: setup
	AM_FAULT_TRIALS=100 AM_FUZZ_EXAMPLES=1000 AM_FUZZ_DBS=1000 AM_FUZZ_COLUMNS=all \
	  $(BIN)/python -m pytest -q -s tests/test_faults.py tests/test_trust.py tests/test_boundary.py \
	  tests/test_boundary_doors.py tests/test_fuzz_store.py tests/test_fuzz_columns.py

# The whole suite 5 times in a row beside a CPU-busy process it starts and stops itself;
# prints `passed N of 5`. A failure there is a bug to fix, never a re-run.
neighbour: setup setup-apps
	$(BIN)/python bench/neighbour.py 5

# The documentation site (MkDocs, Material) in build/site; its real output is
# regenerated first (scripts/docs.py: the schemas, and blocks read from results/).
docs: setup
	$(BIN)/python scripts/docs.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: setup
	bash scripts/install-system-deps.sh heaptrack
	$(BIN)/python bench/workload_floor.py
	$(BIN)/python bench/calibration.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/html_load.py
	$(BIN)/python bench/report_page.py
	$(BIN)/python bench/report_scale.py
	$(BIN)/python bench/forwarding.py
	$(BIN)/python bench/profile_overhead.py
	$(BIN)/python bench/rss_sampling.py

lint: setup
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy
	PYTHONPATH=src $(BIN)/lint-imports --no-cache
	if command -v rustfmt >/dev/null; then rustfmt --edition 2021 --check native/preload-rs/build.rs native/preload-rs/src/*.rs; fi
	cmake -S . -B build/lint -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build build/lint -j2
	ctest --test-dir build/lint --output-on-failure

setup: $(STAMP_PKG)
	@mkdir -p $(PREFIX)/bin && ln -sfn $(abspath $(BIN))/allocmark $(PREFIX)/bin/allocmark
	@echo "allocmark is $(PREFIX)/bin/allocmark (a link to $(abspath $(BIN))/allocmark)"

# The command on PATH alone, e.g. `make install PREFIX=/opt/tools`.
install: setup

# The Debian packages of the real applications (catalog/workloads.toml).
setup-apps: $(STAMP_APPS)

$(STAMP_APPS): $(STAMP_PKG) scripts/install-system-deps.sh src/allocmark/catalog/workloads.toml
	bash scripts/install-system-deps.sh $$($(BIN)/allocmark workloads --packages)
	@touch $@

$(STAMP_SYS): scripts/install-system-deps.sh
	@mkdir -p $(VENV)
	bash scripts/install-system-deps.sh
	@touch $@

$(STAMP_PKG): $(STAMP_SYS) $(SOURCES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q '.[dev]'
	@touch $@

clean:
	rm -rf $(VENV) build results
