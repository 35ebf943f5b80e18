# Leasehold: `make test` and `make demo` set up everything they need on a fresh machine.
SHELL := /bin/bash
export NODE_OPTIONS := --experimental-vm-modules

.PHONY: all deps binaries contracts node-setup image test test-unit test-e2e typecheck crds cluster build clean-cache chart-lint bench krew-archive

all: test

# Node packages, plus the OpenSSH (sshd machines) and openssl (certificates) the tests drive.
deps: node_modules/.installed
	@command -v openssl >/dev/null && test -x /usr/sbin/sshd && command -v ssh-keygen >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl openssh-server openssh-client)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kubectl, helm and kwok from
# pinned Go modules, cached in ~/.cache/leasehold.
binaries:
	bash e2e/cluster/build.sh

# The service descriptions the emulators are held to that are not npm packages: the
# Compute Engine discovery document from the pinned Go module (e2e/fakes/gce/discovery.json),
# through the Go module proxy, cached in ~/.cache/leasehold/specs.
contracts:
	bash e2e/fakes/gce/discovery.sh >/dev/null

# The real node of e2e/installed.test.ts: containerd, runc, CNI plugins, buildah and
# debootstrap from Debian packages, then its images (the controller's from the
# Dockerfile), cached in ~/.cache/leasehold/images. Needs root.
node-setup:
	bash e2e/node/setup.sh >/dev/null

# The controller image for your registry: IMAGE=registry.example/leasehold:0.1.0 make image,
# then push it (docker push / buildah push) and install the chart with image.repository/tag.
IMAGE ?= leasehold:dev
image:
	@if command -v docker >/dev/null; then docker build -t $(IMAGE) .; \
	elif command -v buildah >/dev/null; then buildah bud -t $(IMAGE) .; \
	else echo "make image needs docker or buildah" >&2; exit 1; fi

typecheck: deps
	npx tsc --noEmit -p .

crds: deps
	npm run --silent gen:crds

test-unit: deps contracts
	npx jest --selectProjects unit emulators

test-e2e: deps contracts binaries node-setup
	npx jest --selectProjects e2e

# The binaries build in the background while the Node packages install and
# typecheck and the unit tests run (they need none); the e2e tests follow once
# all of them passed. The script runs `make deps` itself, after starting the build.
test:
	bash e2e/setup/make-test.sh

build: deps
	npm run --silent build

# The CLI for krew: the same one minified file npm installs (cli/bundle.ts, esbuild), packed
# with plugins/leasehold.yaml filled in.
KREW_URI ?= https://example.invalid/set-KREW_URI/leasehold-krew.tar.gz
krew-archive: deps
	@rm -rf dist/krew && mkdir -p dist/krew/pkg
	node --import tsx cli/bundle.ts dist/krew/pkg/kubectl-leasehold
	tar -C dist/krew/pkg -czf dist/krew/leasehold-krew.tar.gz --owner=0 --group=0 --mtime=@0 kubectl-leasehold
	@sha=$$(sha256sum dist/krew/leasehold-krew.tar.gz | cut -d' ' -f1); version=$$(node -p 'require("./package.json").version'); \
	  sed -e "s|@URI@|$(KREW_URI)|" -e "s|@SHA256@|$$sha|" -e "s|@VERSION@|$$version|" plugins/leasehold.yaml > dist/krew/leasehold.yaml; \
	  echo "dist/krew/leasehold-krew.tar.gz sha256 $$sha; manifest dist/krew/leasehold.yaml"

# helm lint and helm template of charts/leasehold, with the helm built by `make binaries`.
# That helm is built without the release ldflags, so it would assume Kubernetes
# 1.20 and refuse the chart's kubeVersion: give it the test control plane's.
CHART_KUBE_VERSION := 1.36.3
chart-lint: binaries
	@bin="$$(bash e2e/cluster/build.sh | tail -n 1)"; kv="--kube-version=$(CHART_KUBE_VERSION)"; \
	  "$$bin/helm" lint --strict "$$kv" charts/leasehold && \
	  "$$bin/helm" template leasehold charts/leasehold "$$kv" --namespace leasehold-system >/dev/null && \
	  "$$bin/helm" template leasehold charts/leasehold "$$kv" --namespace leasehold-system \
	    --set 'watchNamespace=ml,secretNamespaces={ml,cloud},secretNames={lambda-api-key},metrics.serviceMonitor.enabled=true,dashboard.enabled=true' \
	    --set 'metrics.networkPolicy.enabled=true,admissionPolicy.exemptGroups={lease-ops},fullnameOverride=lh' \
	    --set-file providerScripts.sshd-machine\\.sh=e2e/providers/sshd-machine.sh >/dev/null && \
	  "$$bin/helm" template leasehold charts/leasehold "$$kv" --namespace leasehold-system \
	    --set 'replicas=1,leaderElection.enabled=false,serviceAccount.create=false,serviceAccount.name=leasehold-existing,runnerTarget.sshUser=ubuntu,runnerTarget.sshPort=2222,runnerTarget.gceOwnIdentity=true' \
	    --set 'global.imageRegistry=registry.example,userRoles.enabled=false,admissionPolicy.enabled=false' >/dev/null && \
	  "$$bin/helm" template leasehold charts/leasehold "$$kv" --namespace leasehold-system \
	    --set 'peerFleet.enabled=false,watchNamespace=ml' >/dev/null && \
	  echo "chart ok"

# The whole loop on this machine, no network: control plane, CRDs, controller, a Lease on a
# local sshd machine, ssh into it, idle release. DEMO_IDLE_TIMEOUT=10s shortens it; Ctrl-C cleans up.
.PHONY: demo
demo: deps binaries
	node --import tsx e2e/demo/main.ts

# The same story as users install Leasehold: the image built from the Dockerfile, a real node
# (containerd + kubelet in a network namespace), `helm install` of charts/leasehold, a Lease
# through a provider script from the chart's ConfigMap. Needs root; installs the Debian
# packages it lacks. Ctrl-C cleans up.
.PHONY: demo-installed
demo-installed: deps binaries
	node --import tsx e2e/demo/installed.ts

# The PeerFleet act, on this machine with no network: our cluster (with kube-scheduler and
# kwok's three fake GPU nodes) lends idle nodes to a peer cluster's Job queue, drains one for
# our own Job without cutting the peer Job off, and shows the accounting. Ctrl-C cleans up.
.PHONY: demo-peer
demo-peer: deps binaries
	node --import tsx e2e/demo/peer.ts

# A local control plane in the foreground; prints the KUBECONFIG to export.
# CLUSTER_FLAGS="--all --gpu-nodes=3 --peer" adds kube-controller-manager, kube-scheduler, kwok
# with fake GPU nodes and a peer control plane (e2e/cluster/main.ts --help lists the flags).
cluster: deps binaries
	node --import tsx e2e/cluster/main.ts $(CLUSTER_FLAGS)

clean-cache:
	rm -rf $${LEASEHOLD_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/leasehold}

# Benchmarks (not part of test): control-loop overhead, quiet cost, memory, Lambda pacing,
# idle release lateness, leasehold run against plain ssh, printed as ratios from one run. See
# bench/README.md; BENCH_N etc. shrink it.
bench: deps binaries
	node --import tsx bench/run.ts
