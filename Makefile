# The two commands of the course (see README.md):
#   make course   install into .venv, fetch the data, run every lesson once as a notebook:
#                 notebooks/*.ipynb with outputs, notebooks/*.html, notebooks/index.html,
#                 figures/<lesson>/, and the paper-claims report figures/REPORT.md
#                 (make course LESSONS=01: lesson 01 alone, under two minutes)
#   make test     install into .venv, lint (ruff check), run the test suite
#   make check    (contributors) lint and the mechanisms' and statistics' tests, under a minute
# Other targets: setup, data, notebooks (unexecuted, beside any you ran), smoke (the course in
# smoke mode, into notebooks-smoke/ and figures-smoke/), class-pages (the pages to share with a
# class: the exercises shown as stubs), lab (install JupyterLab, open notebooks/), check-pages
# (open every page in headless Chromium), student, exercises, bench, test-gpu (on a CUDA
# machine). No target overwrites a notebook you ran or edited.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# The tested torch. Installed before the rest so pip never picks a different (multi-GB) build.
TORCH  ?= torch==2.13.0
# pytest's worker processes for `make test` and `make check` (pytest-xdist; 0: one process);
# a test file stays on one worker, so that its session fixtures (student copies) are built once,
# and the workers take the longest files first (tests/conftest.py, SLOW_FILES)
JOBS   ?= 2

.PHONY: setup data notebooks course smoke class-pages lab check-pages check test test-gpu student \
        exercises bench clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

data: setup
	@if [ -f data_scripts/fetch_all.py ]; then $(PY) data_scripts/fetch_all.py; fi

# unexecuted notebooks in notebooks/, to run yourself; one that holds outputs or edits is kept
notebooks: setup
	$(PY) -m minattn.course.course --notebooks-only

# make course [LESSONS="01 06"]: every lesson (or these) executed as a notebook, the HTML course, the report
course: setup data
	$(PY) -m minattn.course.course $(if $(LESSONS),--only $(LESSONS))

# the course at tiny sizes, in notebooks-smoke/ and figures-smoke/ (never over a full run's)
smoke: setup
	MINATTN_SMOKE=1 $(PY) -m minattn.course.course $(if $(LESSONS),--only $(LESSONS))

# make class-pages [DIR=notebooks-smoke]: a copy of a build (notebooks/ by default) in
# <DIR>-class/, whose listings of the library show the exercises as the students' stubs: share
# notebooks-class/ with a class, never notebooks/ (its pages show every solution)
class-pages: setup
	$(PY) -m minattn.course.course --class-pages $(if $(DIR),--out $(DIR))

# JupyterLab is an optional extra (requirements-lab.txt), installed on first use; blank
# notebooks are written for the lessons that have none in notebooks/ (yours are kept).
# As root (a container) Jupyter needs --allow-root.
lab: setup
	$(PY) -m pip install --quiet -r requirements-lab.txt
	$(PY) -m minattn.course.course --notebooks-only
	$(VENV)/bin/jupyter lab $$([ "$$(id -u)" = 0 ] && echo --allow-root) notebooks/

# make check-pages [DIR=notebooks-smoke]: every page of a build in headless Chromium (formulas
# that fail to typeset, images that do not load, raw colour codes); needs chromium installed
check-pages: setup
	$(PY) -m minattn.course.pages check $(or $(DIR),notebooks)

# make check: the contributors' loop (29-48 s on 2 cores): lint, then the mechanisms' and the
# statistics' tests; no lesson runs, no student copy, no data download (tests that need a
# dataset skip without it). `make test` runs everything.
check: setup
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile --no-loadscope-reorder -m "not course and not slow" \
		|| { rc=$$?; [ $$rc -ne 5 ] || echo "pytest collected no tests"; exit $$rc; }

test: setup data
	$(PY) -m ruff check .
	$(PY) -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder || { rc=$$?; [ $$rc -ne 5 ] || echo "pytest collected no tests"; exit $$rc; }

# make test-gpu [LESSONS="02 03"] [FULL="01 04" | FULL=all]: on a CUDA machine, the cuda-marked
# tests and every lesson as a script in smoke mode on the GPU (no notebook packages needed), then
# the FULL lessons at full scale (all: every lesson), one line per lesson with its seconds; exits
# non-zero without CUDA. PY=python3 uses an existing environment (no set-up).
test-gpu: $(if $(filter $(VENV)/bin/python,$(PY)),setup)
	$(PY) -m minattn.course.gpu_tier $(if $(LESSONS),--only $(LESSONS)) $(if $(FULL),--full $(FULL))

# make student [ONLY="1 2.1"] [FORCE=1 [RESET=1]]: ./student, a copy with those solutions removed
# (grading runs each submission in a bubblewrap sandbox: sudo apt-get install bubblewrap)
student: setup
	$(PY) -m minattn.course.classroom student student $(if $(ONLY),--only $(ONLY)) $(if $(FORCE),--force) $(if $(RESET),--reset)

bench: setup
	for b in benchmarks/*.py; do $(PY) $$b --quick || exit 1; done

# never ./student or notebooks/: they may hold a student's work
clean:
	rm -rf $(VENV) figures figures-smoke notebooks-smoke notebooks-class notebooks-smoke-class \
		.pytest_cache
	@echo "kept notebooks/ and student/ (they may hold your work): remove them yourself"

# In a student copy: which exercises pass? make exercises [EX=1.2] [TB=1 for tracebacks]
# [TIMEOUT=seconds, default 900; Ctrl-C or the limit ends everything it started]
# (installs .venv first unless $(PY) already exists, e.g. make exercises PY=../.venv/bin/python)
# The table is the answer: exercises that do not pass yet are no error of make's (the check's
# exit code 1); a check that could not run is (2: a wrong id; 130: Ctrl-C).
exercises: $(if $(wildcard $(PY)),,setup)
	@$(PY) -m minattn.course.classroom check $(EX) $(if $(TB),-v) $(if $(TIMEOUT),--timeout $(TIMEOUT)) \
		|| [ $$? -eq 1 ]
