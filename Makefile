# allocmark: `make demo` runs the quick suite, `make test` runs lint and tests.
# Set-up steps leave stamp files in .venv, so a second run skips them.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_SYS := $(VENV)/.system-deps
STAMP_PKG := $(VENV)/.installed
SOURCES := pyproject.toml CMakeLists.txt $(shell find src native tests/native -type f \
             \( -name '*.py' -o -name '*.toml' -o -name '*.c' -o -name '*.h' -o -name '*.j2' -o -name '*.rs' -o -name '*.cpp' \) 2>/dev/null)

.PHONY: demo test lint setup bench clean

demo: setup
	$(BIN)/allocmark allocators
	$(BIN)/allocmark run --suite quick --db results/quick.db
	$(BIN)/allocmark report --db results/quick.db --format md -o results/quick.md
	$(BIN)/allocmark report --db results/quick.db --format csv -o results/quick.csv

test: setup lint
	$(BIN)/python -m pytest -q tests

bench: setup
	$(BIN)/python bench/workload_floor.py
	$(BIN)/python bench/report_scale.py
	$(BIN)/python bench/forwarding.py

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	if command -v rustfmt >/dev/null; then rustfmt --edition 2021 --check native/preload-rs/build.rs native/preload-rs/src/*.rs; fi
	cmake -S . -B build/lint -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build build/lint -j2
	ctest --test-dir build/lint --output-on-failure

setup: $(STAMP_PKG)

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
