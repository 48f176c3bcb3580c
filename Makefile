# electd — developer entry points. `make test` is the test command CI runs.
GO        ?= go
BIN       := $(CURDIR)/bin
ETCD      := $(BIN)/etcd
KUBE_APISERVER := $(BIN)/kube-apiserver
KUBE_APISERVER_MOD := test/servers/kube-apiserver
GOTESTFLAGS ?=

.PHONY: test deps etcd kube-apiserver redis-server zookeeper nft build release vet fmt demo clean fuzz

## test: install what the tests need (redis-server, zookeeper, nft, etcd, kube-apiserver), then run every test with -race.
test: deps
	ELECTD_ETCD_BIN=$(ETCD) ELECTD_KUBE_APISERVER_BIN=$(KUBE_APISERVER) $(GO) test -race -count=1 -timeout 20m $(GOTESTFLAGS) ./...

deps: etcd kube-apiserver redis-server zookeeper nft

## etcd: build etcd from the go.etcd.io/etcd/server/v3 module pinned in go.mod.
etcd: $(ETCD)
$(ETCD): go.mod go.sum
	@mkdir -p $(BIN)
	$(GO) build -o $(ETCD) go.etcd.io/etcd/server/v3

## kube-apiserver: build Kubernetes' API server v1.37.2 from the k8s.io/kubernetes
## module, in a module of its own (test/servers/kube-apiserver: its go.mod says
## why), so that electd's go.mod does not change. With the version stamped as a
## release build would have it, and stripped (119 MB instead of 171). Measured on
## 2 shared cores under a load of about 3.5: 4 min 16 s with empty module and
## build caches, 4 min 40 s with the modules downloaded (compiling is the cost,
## not downloading); 2 s when only the link is to do. The build peaks at 2.4 GB.
KUBE_VERSION_PKG := k8s.io/component-base/version
KUBE_LDFLAGS := -s -w -X $(KUBE_VERSION_PKG).gitVersion=v1.37.2 -X $(KUBE_VERSION_PKG).gitMajor=1 \
  -X $(KUBE_VERSION_PKG).gitMinor=37 -X $(KUBE_VERSION_PKG).gitTreeState=clean
kube-apiserver: $(KUBE_APISERVER)
$(KUBE_APISERVER): $(KUBE_APISERVER_MOD)/go.mod $(KUBE_APISERVER_MOD)/go.sum $(KUBE_APISERVER_MOD)/main.go
	@mkdir -p $(BIN)
	cd $(KUBE_APISERVER_MOD) && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(KUBE_APISERVER) .

## redis-server: install Debian's package when it is missing.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "installing redis-server from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; }
	@redis-server --version

## zookeeper: install Debian's package (3.8; about 5 s, OpenJDK comes with it)
## when its server is missing: the tests run its jar with java (internal/testenv/zk.go).
ZK_SERVER := /usr/share/zookeeper/bin/zkServer.sh
zookeeper:
	@test -x $(ZK_SERVER) || { echo "installing zookeeper from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq zookeeper >/dev/null; }
	@test -x $(ZK_SERVER) && echo "zookeeper: $(ZK_SERVER)"

## nft: install Debian's nftables when it is missing (as root): the tests cut
## one electd off a Redis Sentinel or Cluster, or an etcd cluster, with a rule
## on its sockets.
nft:
	@command -v nft >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { \
	  echo "installing nftables from Debian's packages"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null; }

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/electd ./cmd/electd

## release: the production build, as the Dockerfile makes it (internal/release
## says why each flag): static, without the embedded etcd, stripped.
VERSION ?= dev
release:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -tags noembed,grpcnotrace,urfave_cli_no_docs \
	  -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/electd-release ./cmd/electd

vet:
	$(GO) vet ./...
	$(GO) vet -tags noembed ./cmd/electd
	@test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }

demo:
	$(GO) run ./cmd/electd demo

clean:
	rm -rf $(BIN)

## torture: the long fault-injection run of test/torture on etcd, Redis,
## Redis Sentinel, Redis Cluster, a three-member etcd cluster, a Redlock
## quorum of three redis-servers, a kube-apiserver (k8s), a standalone ZooKeeper
## server and a three-server ZooKeeper ensemble (zk, zk-ensemble; TORTURE_BACKENDS, in parallel):
## TORTURE_FAULTS faults per backend
## (default 200), TORTURE_SEED to replay a schedule, TORTURE_CONTAINMENT=pgroup
## (or pidns, userns) to force a mode, TORTURE_NOBODY=1 to run every electd as
## nobody (rootless: userns by default). Prints every fault and
## the figures, and writes the figures as Markdown to bin/torture-report.md.
## (`make test` runs its short version: 16 faults on each;
## measured on 2 cores: `make test` 7 min with the first four, 5 min 15 s
## with etcd and Redis alone; the etcd cluster adds about 30 s to the torture
## package, 160 s instead of 132 s, and 15 s to test/e2e; Redlock about 10 s
## more to the torture package, 170 s, and runs in test/e2e and test/lock
## too. `make torture TORTURE_BACKENDS=redlock` alone: about 11 min. ZooKeeper
## (issue 30): 20 faults took 55 s (zk) and 61 s (zk-ensemble), in parallel with
## each other, so the short run gains an estimated 50 s (not measured in
## `make test`); `make torture TORTURE_BACKENDS=zk,zk-ensemble` took 12 min on
## 2026-12-07 (zk 9 min 27 s, zk-ensemble 11 min 43 s, in parallel).)
TORTURE_FAULTS ?= 200
TORTURE_BACKENDS ?= etcd,redis,redis+sentinel,redis+cluster,etcd-cluster,redlock,k8s,zk,zk-ensemble
.PHONY: torture
torture: deps
	@mkdir -p $(BIN)
	@rm -f $(BIN)/torture-report.md
	ELECTD_ETCD_BIN=$(ETCD) TORTURE_FAULTS=$(TORTURE_FAULTS) TORTURE_TOPOLOGY_FAULTS=$(TORTURE_FAULTS) \
	  TORTURE_BACKENDS=$(TORTURE_BACKENDS) TORTURE_REPORT=$(BIN)/torture-report.md \
	  $(GO) test -count=1 -timeout 240m -v -run '^TestTorture$$' ./test/torture/
	@cat $(BIN)/torture-report.md

## bench: measure handover, failover, store cost, /leader and footprint against real
## etcd and redis-server (and a Redis Sentinel topology and a three-member etcd cluster), beside etcdctl
## lock/elect and a naive Redis lock, and electd's redlock:// backend beside go-redsync/redsync v4 on
## three redis-servers (~8 min on 2 shared cores before the redlock phase, which adds about 1.5 min, and
## the etcd cluster's renewal windows, about 1 min), and electd's k8s:// backend beside client-go's
## leaderelection on a real kube-apiserver (phase k8s, about 6.5 min; it needs bin/kube-apiserver), and
## renewals with etcd auth on and off side by side (phase auth, a 10-minute window): 26 min in all on
## 2 cores on 2026-12-06; and electd's zk:// backend on a standalone ZooKeeper (Debian's zookeeper
## package) beside the textbook lock recipe on go-zookeeper: handover, crash failover, a cut-off
## leader, an idle follower's requests and requests per leader change at N = 10, 100, 1000, and
## handover and crash failover on a 3-server ensemble (phase zk, about 6 min; -quick: N = 10 and 100,
## about 2.5 min);
## prints a table and writes it as Markdown to bin/bench-results.md (see docs/BENCHMARKS.md).
## One phase: make bench BENCHFLAGS='-only redlock' (add -quick for a smoke test). The etcd cluster's
## figures before and after a change, in one run: make bench BENCHFLAGS='-baseline REV' (electd built at
## the git revision REV beside the tree's, in the etcd-cluster phase; alone: '-only etcd-cluster -baseline REV').
.PHONY: bench
bench: redis-server kube-apiserver
	@mkdir -p $(BIN)
	ELECTD_KUBE_APISERVER_BIN=$(KUBE_APISERVER) $(GO) run ./test/bench -md $(BIN)/bench-results.md $(BENCHFLAGS)

## fuzz: a short, bounded run of every fuzz target (CI runs it after `make test`;
## their seed corpora already run as tests). FUZZTIME=60s for a longer look.
FUZZTIME ?= 3000x
fuzz:
	@for f in FuzzParseSignal FuzzRunDurations; do \
	  $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./cmd/electd || exit 1; done
	@for f in FuzzStoreURLSecret FuzzParseStoreURL; do \
	  $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./store || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzNames$$' -fuzztime $(FUZZTIME) ./elector
	$(GO) test -run '^$$' -fuzz '^FuzzHandlers$$' -fuzztime $(FUZZTIME) ./health
