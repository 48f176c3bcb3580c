# electd — developer entry points. `make test` is the test command CI runs.
GO        ?= go
BIN       := $(CURDIR)/bin
ETCD      := $(BIN)/etcd
GOTESTFLAGS ?=

.PHONY: test deps etcd redis-server build vet fmt demo clean

## test: install what the tests need (redis-server, etcd), then run every test with -race.
test: deps
	ELECTD_ETCD_BIN=$(ETCD) $(GO) test -race -count=1 -timeout 20m $(GOTESTFLAGS) ./...

deps: etcd redis-server

## etcd: build etcd from the go.etcd.io/etcd/server/v3 module pinned in go.mod.
etcd: $(ETCD)
$(ETCD): go.mod go.sum
	@mkdir -p $(BIN)
	$(GO) build -o $(ETCD) go.etcd.io/etcd/server/v3

## redis-server: install Debian's package when it is missing.
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "installing redis-server from Debian's packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server >/dev/null; }
	@redis-server --version

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/electd ./cmd/electd

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }

demo:
	$(GO) run ./cmd/electd demo

clean:
	rm -rf $(BIN)
