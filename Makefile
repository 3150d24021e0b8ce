# Daggers Platform. Everything is idempotent; all state lives under .local/ (gitignored).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.9
BUF_VERSION := 1.75.0
BUF := .local/npm/node_modules/.bin/buf
STAMPS := .local/stamps
APT_PACKAGES := openjdk-17-jre-headless victoria-metrics influxdb postgresql-15 postgresql-client-15 zookeeper chromium chromium-driver prometheus-alertmanager iptables stress-ng
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
PROTOS := $(shell find protos -name '*.proto')

.PHONY: help setup apt venv protos jvm buf up down status test demo bench lint fmt lock reference dashboards clean

help: ## list targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

setup: apt venv protos jvm buf ## install what is missing: Debian packages, .venv from the lock, protos, JVM archive, buf

apt: ## Debian packages (only the missing ones)
	@missing=$$(for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "apt: installing $$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

venv: $(STAMPS)/venv ## the virtualenv, exactly as locked in .ci/requirements.lock

$(STAMPS)/venv: .ci/requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# a venv made by uv has no pip: bootstrap it before installing the pinned uv
	@test -x $(UV) || { $(PY) -m pip --version >/dev/null 2>&1 || $(PY) -m ensurepip >/dev/null; \
	  $(PY) -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"; }
	@# --no-deps: the lock is complete, and it excludes pyspark-client (it would overwrite pyspark's files).
	@# --compile-bytecode: uv writes no .pyc by default, so every Python process (drivers, Spark's Python workers,
	@# CLIs, Airflow's tasks) compiled what it imported, ~2 s each for the engine (docs/decisions.md). It compiles
	@# the whole environment, so once is enough: the editable install adds no module to compile.
	$(UV) pip install -q --python $(PY) --no-deps --compile-bytecode -r .ci/requirements.lock
	$(UV) pip install -q --python $(PY) --no-deps -e .
	@# Spark's own Python processes import PySpark and Py4J from zips: leave them to the venv's compiled copies
	$(PY) jobs/engine/pyspark_archive.py
	@# the build's copy of the metadata: with the repo on PYTHONPATH (Airflow's processes) its entry points would be
	@# seen twice, the Daggers plugin loaded twice (an import error on Airflow's dashboard); the venv has its own
	@rm -rf daggers_platform.egg-info
	@mkdir -p $(STAMPS) && touch $@

protos: $(STAMPS)/protos ## compile protos/ into .local/gen (descriptor set + Python modules)

$(STAMPS)/protos: $(PROTOS) protos/build.py $(STAMPS)/venv
	$(PY) -m protos.build
	@touch $@

jvm: $(STAMPS)/jvm ## class-data archive of Spark's classes: the driver JVM starts in about half the time

$(STAMPS)/jvm: $(STAMPS)/venv jobs/engine/jvm_archive.py
	$(PY) -m jobs.engine.jvm_archive
	@touch $@

buf: $(STAMPS)/buf ## buf (npm @bufbuild/buf), which judges schema changes of the stream catalog

$(STAMPS)/buf:
	@command -v npm >/dev/null || { echo "apt: installing npm"; $(SUDO) apt-get install -y -qq --no-install-recommends npm >/dev/null; }
	npm install --prefix .local/npm --no-save --no-audit --no-fund --loglevel=error @bufbuild/buf@$(BUF_VERSION)
	@$(BUF) --version >/dev/null
	@mkdir -p $(STAMPS) && touch $@

up: setup ## start (or converge) the local stack: make up WORKERS=3 ONLY=kafka_broker,victoria_metrics
	$(VENV)/bin/odin up $(if $(WORKERS),--workers $(WORKERS)) $(if $(ONLY),--only $(ONLY))

down: ## stop every service of the local stack (data kept; odin down --purge deletes it)
	@test -x $(VENV)/bin/odin && $(VENV)/bin/odin down || echo "nothing to stop (no .venv)"

status: ## table of services, URLs and health
	$(VENV)/bin/odin status

test: setup ## run the test suite (starts real services on free ports; stops them)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

demo: setup ## the platform's story through Airflow: stack, team clusters, two daggers, chaos, health, reports, checks
	$(PY) -m bench.demo

bench: setup ## benchmarks (figures and ratios, not pass/fail)
	$(PY) -m bench.stack_up
	$(PY) -m bench.udfs
	$(PY) -m bench.sql_bounds
	$(PY) -m bench.dag_parse
	$(PY) -m bench.process_start
	$(PY) -m bench.dagger_throughput
	$(PY) -m bench.deploy_latency
	$(PY) -m bench.loki_playbooks
	$(PY) -m bench.targets

lint: venv ## ruff + terraform fmt
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m odin.provision.tf fmt -check -recursive terraform
	$(PY) -m odin.dashboards --check

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	$(PY) -m odin.provision.tf fmt -recursive terraform

lock: ## re-resolve .ci/requirements.lock (pyspark-client excluded)
	$(UV) pip compile pyproject.toml --extra dev --python-version 3.11 \
	  --excludes .ci/lock-excludes.txt -o .ci/requirements.lock

reference: venv ## regenerate docs/reference from the models and CLIs
	$(PY) docs/reference/generate.py

dashboards: venv ## regenerate the Grafana dashboards and provisioning (odin/dashboards/grafana)
	$(PY) -m odin.dashboards

clean: down ## remove .local state and .venv
	rm -rf .local $(VENV)
