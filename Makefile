# The two commands of the course (see README.md):
#   make course   install into .venv, fetch the data, build the notebooks, run every lesson
#   make test     install into .venv, run the test suite
# Other targets: setup, data, notebooks, smoke (every lesson in smoke mode), student, bench.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# The tested torch. Installed before the rest so pip never picks a different (multi-GB) build.
TORCH  ?= torch==2.13.0

.PHONY: setup data notebooks course smoke test student exercises bench clean

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
	$(PY) -m minattn.course --notebooks-only

course: setup data
	$(PY) -m minattn.course

smoke: setup
	MINATTN_SMOKE=1 $(PY) -m minattn.course

test: setup data
	$(PY) -m pytest || { rc=$$?; [ $$rc -ne 5 ] || echo "pytest collected no tests"; exit $$rc; }

# make student [ONLY="1 2.1"] [FORCE=1]: ./student, a copy with those solutions removed
student: setup
	$(PY) -m minattn.tools.exercises student student $(if $(ONLY),--only $(ONLY)) $(if $(FORCE),--force)

bench: setup
	for b in benchmarks/*.py; do $(PY) $$b --quick || exit 1; done

clean:
	rm -rf $(VENV) figures notebooks .pytest_cache  # never ./student: it may hold a student's work

# In a student copy: which exercises pass? make exercises [EX=1.2] [TB=1 for tracebacks]
# (installs .venv first unless $(PY) already exists, e.g. make exercises PY=../.venv/bin/python)
exercises: $(if $(wildcard $(PY)),,setup)
	$(PY) -m minattn.tools.exercises check $(EX) $(if $(TB),-v)
