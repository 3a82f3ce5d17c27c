# Developer entry points. `make test` is the whole suite (what CI runs); `make demo` is the main job.
SHELL := /bin/bash
.DEFAULT_GOAL := help
STATE ?= /var/tmp/workflow-agent-dev
export WORKFLOW_AGENT_STATE := $(STATE)
VENV := .venv
PY := $(VENV)/bin/python
ACTIVATE := . $(VENV)/bin/activate &&
PYTHON ?= $(shell command -v python3.11 || command -v python3)

.PHONY: help bootstrap venv engine images test lint sanity units pytest galaxy molecule builds deploy go-builds pulumi-image k8s demo demo-down bench bench-smoke soak k8s-up k8s-down clean

help:
	@echo "make demo       fleet rollout of 6 agents on 3 systemd containers against the local emulator"
	@echo "make demo-down  tear the demo down"
	@echo "make test       the whole suite (lint, sanity, units, pytest, galaxy build, molecule, deploy, builds, k8s)"
	@echo "make lint | sanity | units | pytest | galaxy | molecule | deploy | builds | k8s | bench | soak | k8s-up | k8s-down"
	@echo "make go-builds  the Go builds (Helm, Pulumi, its YAML language host, Kubernetes with kubeadm, Prometheus, the registry, kind, CoreDNS, actionlint)"
	@echo "make pulumi-image  local/pulumi:latest, the job image with those Pulumi binaries"

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements/dev.in requirements/constraints.txt agent/pyproject.toml tests/emulator/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'pip<26'
	$(PY) -m pip install -q -r requirements/dev.in -c requirements/constraints.txt
	@# The agent's distribution was "workflow-agent" before issue 25: a venv from then keeps it.
	$(PY) -m pip uninstall -q -y workflow-agent 2>/dev/null
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
	bash scripts/prometheus.sh install

# The suites a stage must run (scripts/stage.sh --require REPORT[::PATH], see scripts/verdict.py):
# one that collects nothing or skips every case fails the stage, whatever the exit code.
# lint, galaxy and bootstrap are checks that do not skip: their exit code is their verdict.
require = $(foreach s,$(2),--require '$(1)::$(s)')

lint: venv
	bash scripts/stage.sh lint -- bash scripts/lint.sh

# Sanity and units run on every ansible-core that meta/runtime.yml claims: the venv's (2.19),
# and each older one in its own venv (scripts/core-venv.sh; reports under junit/core-X.Y/).
OLDER_CORES := 2.17 2.18
on_cores = rc=0; bash scripts/ansible-test.sh $(1) || rc=1; \
  for c in $(OLDER_CORES); do bash scripts/ansible-test.sh --core $$c $(1) || rc=1; done; exit $$rc
in_cores = $(1) $(foreach c,$(OLDER_CORES),$(addprefix core-$(c)/,$(1)))

# Sanity tests whose JUnit reports (ansible-test --junit) must show they ran; `*`: all of them
# (so that every skip is listed).
SANITY_TESTS := * compile-python-3.11 import-python-3.11 validate-modules pylint pep8 yamllint
sanity: venv
	bash scripts/stage.sh sanity \
	  $(foreach r,$(call in_cores,$(SANITY_TESTS:%=ansible-test-sanity-%.xml)),--require '$(r)') \
	  -- '$(call on_cores,sanity)'

UNIT_SUITES := $(addprefix tests/unit/plugins/,action filter module_utils modules)
units: venv
	bash scripts/stage.sh units \
	  $(foreach r,$(call in_cores,python3.11-*-units.xml),$(call require,$(r),$(UNIT_SUITES))) \
	  -- '$(call on_cores,units)'

# The k8s stage runs the Kubernetes cases: the contract's kubernetes harness, the kubernetes
# target's tests, the chart on the cluster and the `kubectl patch --local` cross-checks (they
# would only skip here).
PYTEST_SUITES := agent/tests agent/tests/targets/test_contract.py agent/tests/targets/test_docker.py \
  agent/tests/targets/test_process.py tests/emulator/tests tests/emulator/tests/test_emu_image.py \
  tests/system tests/system/test_stage_verdicts.py tests/system/test_k8s_image.py tests/system/test_role_preflight.py \
  tests/system/test_agent_executor.py tests/conformance tests/reliability tests/chart/test_chart.py
pytest: bootstrap
	bash scripts/stage.sh pytest $(call require,pytest.xml,$(PYTEST_SUITES)) -- '$(ACTIVATE) pytest -q -n 3 --dist loadfile \
	  --ignore=agent/tests/targets/test_kubernetes.py --ignore=tests/chart/test_chart_cluster.py --deselect agent/tests/targets/test_strategic_merge.py::test_same_result_as_kubectl \
	  $(addprefix --ignore=,$(GO_BUILDS_SUITES) $(DEPLOY_SUITES)) -k "not (test_contract and kubernetes)" --junitxml=$(STATE)/junit/pytest.xml'

# images: the execution environment is built FROM local/debian12-ee-base:latest (tests/galaxy/ee.sh).
galaxy: venv images
	bash scripts/stage.sh galaxy -- bash scripts/galaxy.sh

# A local Galaxy API (Pulp) on loopback, state under $(STATE)/galaxy-server; `make galaxy` starts
# and stops its own. ANSIBLE_CONFIG=$(STATE)/galaxy-server/ansible.cfg points ansible-galaxy at it.
.PHONY: galaxy-server galaxy-server-stop
galaxy-server:
	bash scripts/galaxy-server.sh start
galaxy-server-stop:
	bash scripts/galaxy-server.sh stop

# Docker scenarios; the `kind` scenario runs in the k8s stage (or: make molecule SCENARIOS=kind).
MOLECULE_DOCKER := default check_mode multi_instance uninstall upgrade scale adopt
molecule: bootstrap galaxy
	bash scripts/stage.sh molecule $(foreach s,$(or $(SCENARIOS),$(MOLECULE_DOCKER)),--require molecule-$(s).xml) \
	  -- bash scripts/molecule.sh $(or $(SCENARIOS),$(MOLECULE_DOCKER))

# The Go builds (scripts/go-builds.sh; `make test` starts them in the background at its start):
# `builds` waits for every one of them (runs them, on its own), builds the Pulumi job image from
# them, then rehearses each build's resolution step against an empty module cache, offline, and
# checks the image (scripts/builds-stage.sh). Its suites need the builds, so they run here and
# not in the pytest stage. `go-builds` only runs the builds, in the foreground.
GO_BUILDS_SUITES := tests/system/test_go_builds.py tests/system/test_image_pulumi.py
builds: venv
	bash scripts/stage.sh builds $(call require,builds.xml,$(GO_BUILDS_SUITES)) -- bash scripts/builds-stage.sh builds -- $(GO_BUILDS_SUITES)

# Real Pulumi deployments through real agents (process and docker; the kubernetes target's run in
# the k8s stage): they need the Pulumi builds and local/pulumi:latest, so they wait for those two
# builds only (not the Kubernetes ones), and are not in the pytest stage.
DEPLOY_SUITES := tests/system/test_pulumi_deploy.py
deploy: bootstrap
	bash scripts/stage.sh deploy $(call require,deploy.xml,$(DEPLOY_SUITES)) \
	  -- bash scripts/builds-stage.sh deploy pulumi pulumi-language-yaml -- $(DEPLOY_SUITES)

go-builds:
	bash scripts/go-builds.sh run

# A stand-in for the pulumi/pulumi image (Pulumi CLI and YAML language host, root, git, Python),
# built from the Go builds: not in bootstrap, as a cold Pulumi build takes minutes.
pulumi-image: images
	bash scripts/build-pulumi-image.sh

K8S_SUITES := tests/k8s/test_cluster.py agent/tests/targets/test_kubernetes.py agent/tests/targets/test_strategic_merge.py
K8S_REGISTRY_SUITES := tests/k8s/test_registry.py tests/k8s/test_adopt_upstream.py tests/k8s/test_helm_user.py \
  tests/chart/test_chart_cluster.py
k8s: bootstrap galaxy
	bash scripts/stage.sh k8s $(call require,k8s.xml,$(K8S_SUITES)) $(call require,k8s-registry.xml,$(K8S_REGISTRY_SUITES)) \
	  --require k8s-contract.xml --require molecule-kind.xml \
	  -- bash scripts/k8s-stage.sh

test:
	bash scripts/test.sh

# The Pulumi build of the demo's deployment (minutes when cold, then cached) starts first, in the
# background, so that it overlaps everything else; demo.sh up waits for it. Not bootstrap: demo.sh
# up builds only the images the demo runs.
demo:
	bash scripts/demo.sh build
	$(MAKE) --no-print-directory venv engine
	$(ACTIVATE) bash scripts/demo.sh up

demo-down:
	$(ACTIVATE) bash scripts/demo.sh down

bench: bootstrap
	$(ACTIVATE) python benchmarks/run.py

# Each benchmark once at its smallest size, no verdicts, no results file: in `make test`, so that
# a broken benchmark shows in CI.
bench-smoke: bootstrap
	bash scripts/stage.sh bench-smoke -- '$(ACTIVATE) python benchmarks/run.py --smoke'

# Long variants of the reliability suite (10,000 jobs over 50 agents; chaos).
SOAK_SUITES := tests/reliability/test_claims.py tests/reliability/test_chaos.py
soak: bootstrap
	bash scripts/stage.sh soak $(call require,soak.xml,$(SOAK_SUITES)) \
	  -- '$(ACTIVATE) WFA_SOAK=1 pytest -q --junitxml=$(STATE)/junit/soak.xml $(SOAK_SUITES)'

k8s-up: engine
	bash tests/k8s/up.sh

k8s-down:
	bash tests/k8s/down.sh

clean:
	rm -rf $(VENV) dist tests/output .ansible
