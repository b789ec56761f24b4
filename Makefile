# taskrt — background tasks for AI agent harnesses, on protoactor-go.
GO ?= go
PKGS := ./...
STRESS_DURATION ?= 60s
SOAK_DURATION ?= 120s
FUZZTIME ?= 60s
TESTFLAGS ?=
FLAKE_COUNT ?= 20
FLAKE_CPU ?= 1,2,4
FLAKE_PKGS ?= $(PKGS)

.PHONY: help run test race flake bench stress killstorm soak lint fmt tidy-lint fuzz mcp mcp-transcript live-page adapters

# The provider adapters are nested modules (their own go.mod), so that the core
# module never requires a provider SDK; ./... does not reach them.
ADAPTERS := $(patsubst %/go.mod,%,$(wildcard tools/adapters/*/go.mod))

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

run: ## play the agentsim demo
	$(GO) run ./agentsim/cmd/agentsim run

mcp: ## build the MCP server into bin/taskrt-mcp
	$(GO) build -o bin/taskrt-mcp ./tools/cmd/taskrt-mcp

mcp-transcript: ## a real stdio session with the built MCP server, as JSON-RPC lines
	@mkdir -p bin
	$(GO) test -count=1 -run 'TestStdioSession$$' ./tools/cmd/taskrt-mcp -transcript $(CURDIR)/bin/mcp-transcript.txt
	@cat bin/mcp-transcript.txt

live-page: ## retake docs/mcp.md's screenshot of the live page (needs Chromium)
	$(GO) test -count=1 -run 'TestPageInBrowser$$' ./tools/mcpserver/livepage -screenshot $(CURDIR)/docs/live-page.png

test: lint ## vet, gofmt check, and the race-enabled test suite (TESTFLAGS adds go test flags), then the adapters
	$(GO) test -race -count=1 $(TESTFLAGS) $(PKGS)
	$(MAKE) adapters

adapters: ## each provider adapter module (tools/adapters/*): download, tidy check, vet, race-enabled tests
	@set -e; for m in $(ADAPTERS); do \
		echo "== $$m"; \
		(cd $$m && $(GO) mod download && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test -race -count=1 ./...); \
	done

race: ## the test suite under the race detector (same as test, without lint)
	$(GO) test -race -count=1 $(PKGS)

flake: ## the suite FLAKE_COUNT times (-race, -cpu FLAKE_CPU) beside a competing cold-cache go test of the repo
	GO=$(GO) FLAKE_COUNT=$(FLAKE_COUNT) FLAKE_CPU=$(FLAKE_CPU) FLAKE_PKGS="$(FLAKE_PKGS)" ./.ci/flake

bench: ## benchmarks against baselines, one table
	$(GO) run ./bench/cmd/taskrt-bench

.PHONY: cluster-bench cluster-test

cluster-bench: ## remote tasks over NATS next to local ones, and failover times (10 runs each)
	$(GO) run ./bench/cmd/taskrt-cluster-bench

cluster-test: ## only the fault tests of worker nodes (partitions, pauses, crashes, a replicated store); make test runs them too
	$(GO) test -race -count=1 -v -run 'CutOff|Paused|Restarted|ManyOwners|Replicated|StreamLeader|Crash|LostLeases|FailedRenewal|Proxy' ./producers/remote/...

stress: ## randomized stress with invariant checks, and 10,000 model-based sequences
	$(GO) run ./bench/cmd/taskrt-stress -duration $(STRESS_DURATION)
	$(GO) test -run TestModelBased -count=1 -v ./actors -rapid.checks=10000

killstorm: ## bash containment: /bin/true per mode (0 and 2,000 idle processes elsewhere, 2,000 idle host children) and 2,000 tasks disposed at once, both modes
	$(GO) run ./bench/cmd/taskrt-killstorm -true

soak: ## mixed load; fails if heap, goroutines, fds or processes grow after warm-up
	$(GO) run ./bench/cmd/taskrt-soak -duration $(SOAK_DURATION)

fuzz: ## run every fuzz target for FUZZTIME (default 60s)
	$(GO) test -run='^$$' -fuzz=FuzzToolArgs -fuzztime=$(FUZZTIME) ./tools/
	$(GO) test -run='^$$' -fuzz=FuzzParseScenario -fuzztime=$(FUZZTIME) ./agentsim/
	$(GO) test -run='^$$' -fuzz=FuzzRunScript -fuzztime=$(FUZZTIME) -fuzzminimizetime=50x ./agentsim/

lint: ## go vet and the gofmt check
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tidy-lint: ## fail if go.mod/go.sum are not tidy
	$(GO) mod tidy -diff

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')
