# Berth's two commands: `make run` and `make test`.
GO        ?= go
BIN       := bin/berth
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/berth-hq/berth/internal/cli.Version=$(VERSION)
LISTEN    ?= 127.0.0.1:3000

.PHONY: build run test test-deps test-deps-docker test-deps-prometheus test-deps-postgres test-deps-chromium test-deps-sshd test-deps-ssh test-deps-repos vet fuzz bench clean

# The binary is pure Go (no cgo); the race detector of the tests needs cgo.
# The Slurm commands' lean binary (-tags slim: no server, agent or store
# packages) is built first and embedded in the full one, then removed, so
# that no plain `go build` embeds a stale one (internal/cli/leanbin).
LEAN      := internal/cli/leanbin/berth-slurm

build:
	CGO_ENABLED=0 $(GO) build -tags slim -trimpath -ldflags '$(LDFLAGS)' -o $(LEAN) ./cmd/berth
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/berth; rc=$$?; rm -f $(LEAN); exit $$rc

## run: build and start the server with its embedded defaults (SQLite + a local agent).
run: build
	$(BIN) server --listen $(LISTEN)

## test: install what the tests need, then run them all.
test: test-deps vet
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 12m ./...

# What the tests use beyond Go: bash and coreutils for jobs, gcc for -race,
# a Docker engine with a local image for the container tests,
# Prometheus for the test in which it scrapes the server, PostgreSQL
# for the store and server tests that run on it, and chromium for the
# dashboard's browser test.
test-deps: test-deps-docker test-deps-prometheus test-deps-postgres test-deps-chromium test-deps-sshd test-deps-ssh test-deps-repos
	@missing=""; for c in bash gcc seq sleep; do command -v $$c >/dev/null || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; apt-get update -qq && apt-get install -y -qq bash gcc coreutils; fi

# docker.io and busybox-static from Debian, dockerd started if it is not
# running, and local/busybox:ci imported (no registry needed); idempotent.
test-deps-docker:
	@bash scripts/test-docker.sh

# Debian's prometheus package (the test starts its own on a free port); idempotent.
test-deps-prometheus:
	@bash scripts/test-prometheus.sh

# Debian's postgresql package (the tests start their own throwaway cluster
# on a free port and remove it after); idempotent.
test-deps-postgres:
	@bash scripts/test-postgres.sh

# Debian's chromium (internal/web's browser test drives it headless); idempotent.
test-deps-chromium:
	@bash scripts/test-chromium.sh

# Debian's openssh-server (the SSH fleet test starts its own sshd in each
# network namespace it makes, and stops them after); idempotent.
test-deps-sshd:
	@bash scripts/test-sshd.sh

# Debian's OpenSSH client (the dev environment test runs ssh against
# Berth's own SSH endpoint); idempotent.
test-deps-ssh:
	@bash scripts/test-ssh.sh

# git, tar, e2fsprogs (mkfs.ext4) and python3 from Debian, for the code
# and files a run carries and its resources.disk; idempotent.
test-deps-repos:
	@bash scripts/test-repos.sh

vet:
	@test -z "$$(gofmt -l cmd internal)" || (echo "gofmt needed:"; gofmt -l cmd internal; exit 1)
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build -tags slim -o /dev/null ./cmd/berth

## fuzz: run each fuzz target for FUZZTIME (not part of make test); a
## release runs `make fuzz FUZZTIME=10m`. New crashers land in testdata/fuzz.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./internal/spec -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/spec -run '^$$' -fuzz '^FuzzGPU$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/spec -run '^$$' -fuzz '^FuzzDecodeJSON$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/agent -run '^$$' -fuzz '^FuzzReadFrames$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/spec -run '^$$' -fuzz '^FuzzArray$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/spec -run '^$$' -fuzz '^FuzzParseSignal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/server -run '^$$' -fuzz '^FuzzAPIBodies$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/sim -run '^$$' -fuzz '^FuzzParseSWF$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/sim -run '^$$' -fuzz '^FuzzParseWorkload$$' -fuzztime $(FUZZTIME)
	for f in FuzzExpandHostlist FuzzParseDuration FuzzParseBegin FuzzParseArray FuzzParseDependency FuzzSbatch; do \
		$(GO) test ./internal/slurm -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) || exit 1; done

## bench: the performance figures quoted in docs/performance.md.
bench: build
	$(BIN) bench submit
	$(BIN) bench latency
	$(BIN) bench drain
	$(BIN) bench agent --jobs 50

clean:
	rm -rf bin
