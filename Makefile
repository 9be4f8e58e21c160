# fleet-agent: `make run` starts the local stack and the agent, `make test` runs the tests.
# Both create .venv and install what they need when it is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench chaos clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/fleet-agent up

# Two workers, a test module each at a time (module fixtures stay in one
# process); every test brings its own servers, ports and databases.
test: $(STAMP) /usr/bin/chromium lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

bench: $(STAMP)
	$(BIN)/python bench/trigger_storm.py

chaos: $(STAMP)
	$(BIN)/python bench/chaos.py

# The console's browser test drives Debian's chromium (never a downloaded
# browser build); where it cannot be installed the test skips and says why.
/usr/bin/chromium:
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
		|| echo "could not install chromium: the console's browser test will skip"

clean:
	rm -rf $(VENV) var/*.db* var/sim-state.json* .pytest_cache .mypy_cache .ruff_cache
