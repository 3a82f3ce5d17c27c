# Developer entry points. `make test` is the whole suite (what CI runs); `make demo` is the main job.
SHELL := /bin/bash
.DEFAULT_GOAL := help
STATE ?= /var/tmp/workflow-agent-dev
export WORKFLOW_AGENT_STATE := $(STATE)
VENV := .venv
PY := $(VENV)/bin/python
ACTIVATE := . $(VENV)/bin/activate &&
PYTHON ?= $(shell command -v python3.11 || command -v python3)

.PHONY: help bootstrap venv engine images test lint sanity units pytest galaxy molecule k8s demo demo-down bench soak k8s-up k8s-down clean

help:
	@echo "make demo       fleet rollout of 6 agents on 3 systemd containers against the local emulator"
	@echo "make demo-down  tear the demo down"
	@echo "make test       the whole suite (lint, sanity, units, pytest, galaxy build, molecule, k8s)"
	@echo "make lint | sanity | units | pytest | galaxy | molecule | k8s | bench | soak | k8s-up | k8s-down"

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements/dev.in requirements/constraints.txt agent/pyproject.toml tests/emulator/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'pip<26'
	$(PY) -m pip install -q -r requirements/dev.in -c requirements/constraints.txt
	$(PY) -m pip install -q -c requirements/constraints.txt -e 'agent[docker,kubernetes]' -e tests/emulator
	touch $@

engine:
	bash scripts/docker-engine.sh

images: engine
	bash scripts/images.sh
	bash scripts/build-job-image.sh
	bash tests/emulator/build-image.sh
	bash scripts/build-agent-image.sh

bootstrap: venv images

lint: venv
	bash scripts/stage.sh lint -- bash scripts/lint.sh

sanity: venv
	bash scripts/stage.sh sanity -- bash scripts/ansible-test.sh sanity

units: venv
	bash scripts/stage.sh units -- bash scripts/ansible-test.sh units

pytest: bootstrap
	bash scripts/stage.sh pytest -- '$(ACTIVATE) pytest -q -n 3 --dist loadfile --junitxml=$(STATE)/junit/pytest.xml'

galaxy: venv
	bash scripts/stage.sh galaxy -- bash scripts/galaxy.sh

# Docker scenarios; the `kind` scenario runs in the k8s stage (or: make molecule SCENARIOS=kind).
MOLECULE_DOCKER := default check_mode multi_instance uninstall upgrade scale adopt
molecule: bootstrap galaxy
	bash scripts/stage.sh molecule -- bash scripts/molecule.sh $(or $(SCENARIOS),$(MOLECULE_DOCKER))

k8s: bootstrap galaxy
	bash scripts/stage.sh k8s -- bash scripts/k8s-stage.sh

test:
	bash scripts/test.sh

demo: bootstrap
	$(ACTIVATE) bash scripts/demo.sh up

demo-down:
	$(ACTIVATE) bash scripts/demo.sh down

bench: bootstrap
	$(ACTIVATE) python benchmarks/run.py

# Long variants of the reliability suite (10,000 jobs over 50 agents; chaos).
soak: bootstrap
	bash scripts/stage.sh soak -- '$(ACTIVATE) WFA_SOAK=1 pytest -q --junitxml=$(STATE)/junit/soak.xml tests/reliability/test_claims.py tests/reliability/test_chaos.py'

k8s-up: engine
	bash tests/k8s/up.sh

k8s-down:
	bash tests/k8s/down.sh

clean:
	rm -rf $(VENV) dist tests/output .ansible
