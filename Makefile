# soperator.slurm — every developer and CI entry point. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum requirements-dev.txt | cut -c1-12)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.cache/collections
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

help: ## this list
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

collection: ## this checkout as the collection soperator.slurm (a link under .cache/collections)
	@hack/collection-link.sh >/dev/null

deps: ## Debian packages the tools and tests need (only missing ones)
	hack/install-deps.sh

$(STAMP): requirements-dev.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@

venv: $(STAMP) ## Python virtualenv with ansible, molecule, pytest, the kubernetes client

binaries: ## build (once, cached in ~/.cache/soperator) the pinned Kubernetes, etcd and kwok
	hack/build-binaries.sh control-plane

demo: deps venv binaries collection ## local Kubernetes + the CPU example cluster converged by site.yml
	hack/demo.sh

cluster-up: deps binaries ## start the local Kubernetes (loopback only, kwok nodes)
	python3 hack/localcluster.py up

kind: deps ## kind, kubectl and the kind node image, built here from local parts (cached; hack/kind.sh)
	hack/kind.sh build

images: deps ## container images (cached), saved to ~/.cache/soperator/images
	hack/images.sh build save

cluster-down: ## stop the local Kubernetes and remove its state
	python3 hack/localcluster.py down

test: deps venv binaries collection ## everything CI runs: lint, unit, integration against a real cluster, ...
	hack/test.sh

unit: venv collection ## fast unit tests only (no cluster)
	$(PY) -m pytest -q tests/unit

gpu-check-bundle: deps ## stage 7 of hack/gpu-check.sh: real Slurm + the jail plugin as one archive in .gpu-check/
	python3 hack/gpu_slurm.py bundle

bench: deps venv binaries collection ## benchmarks: figures printed, nothing asserted about time
	$(PY) bench/bench_localcluster.py
	$(PY) bench/bench_collection.py
	$(PY) bench/bench_operator.py
	python3 tests/slurm/bench_spank.py --runs 50
	$(PY) tests/slurm/bench_elastic.py --runs 3

.PHONY: help collection deps venv binaries demo kind images cluster-up cluster-down test unit gpu-check-bundle bench
