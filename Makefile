# The two commands of the course (see README.md):
#   make course   install into .venv, fetch the data, run every lesson once as a notebook:
#                 notebooks/*.ipynb with outputs, notebooks/*.html, notebooks/index.html,
#                 figures/<lesson>/, and the paper-claims report figures/REPORT.md
#   make test     install into .venv, lint (ruff check), run the test suite
# Other targets: setup, data, notebooks (unexecuted), smoke (the course in smoke mode),
# lab (install JupyterLab, open notebooks/), student, bench, test-gpu (on a CUDA machine).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# The tested torch. Installed before the rest so pip never picks a different (multi-GB) build.
TORCH  ?= torch==2.13.0

.PHONY: setup data notebooks course smoke lab test test-gpu student exercises bench clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

data: setup
	@if [ -f data_scripts/fetch_all.py ]; then $(PY) data_scripts/fetch_all.py; fi

notebooks: setup
	$(PY) -m minattn.tools.course --notebooks-only

# make course [LESSONS="01 06"]: every lesson (or these) executed as a notebook, the HTML course, the report
course: setup data
	$(PY) -m minattn.tools.course $(if $(LESSONS),--only $(LESSONS))

smoke: setup
	MINATTN_SMOKE=1 $(PY) -m minattn.tools.course $(if $(LESSONS),--only $(LESSONS))

# JupyterLab is an optional extra (requirements-lab.txt), installed on first use.
lab: setup
	$(PY) -m pip install --quiet -r requirements-lab.txt
	test -d notebooks || $(PY) -m minattn.tools.course --notebooks-only
	$(VENV)/bin/jupyter lab notebooks/

test: setup data
	$(PY) -m ruff check .
	$(PY) -m pytest || { rc=$$?; [ $$rc -ne 5 ] || echo "pytest collected no tests"; exit $$rc; }

# make test-gpu [LESSONS="02 03"] [FULL="01 04" | FULL=all]: on a CUDA machine, the cuda-marked
# tests and every lesson as a script in smoke mode on the GPU (no notebook packages needed), then
# the FULL lessons at full scale (all: every lesson), one line per lesson with its seconds; exits
# non-zero without CUDA. PY=python3 uses an existing environment (no set-up).
test-gpu: $(if $(filter $(VENV)/bin/python,$(PY)),setup)
	$(PY) -m minattn.tools.gpu_tier $(if $(LESSONS),--only $(LESSONS)) $(if $(FULL),--full $(FULL))

# make student [ONLY="1 2.1"] [FORCE=1 [RESET=1]]: ./student, a copy with those solutions removed
# (grading runs each submission in a bubblewrap sandbox: sudo apt-get install bubblewrap)
student: setup
	$(PY) -m minattn.classroom student student $(if $(ONLY),--only $(ONLY)) $(if $(FORCE),--force) $(if $(RESET),--reset)

bench: setup
	for b in benchmarks/*.py; do $(PY) $$b --quick || exit 1; done

clean:
	rm -rf $(VENV) figures notebooks .pytest_cache  # never ./student: it may hold a student's work

# In a student copy: which exercises pass? make exercises [EX=1.2] [TB=1 for tracebacks]
# [TIMEOUT=seconds, default 900; Ctrl-C or the limit ends everything it started]
# (installs .venv first unless $(PY) already exists, e.g. make exercises PY=../.venv/bin/python)
exercises: $(if $(wildcard $(PY)),,setup)
	$(PY) -m minattn.classroom check $(EX) $(if $(TB),-v) $(if $(TIMEOUT),--timeout $(TIMEOUT))
