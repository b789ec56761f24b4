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
# Linters, pinned, run with go run so that a fresh clone needs nothing else.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
REVIVE ?= github.com/mgechev/revive@v1.17.0

.PHONY: help run test race flake bench stress killstorm soak lint lint-static fmt-check fmt tidy-lint fuzz mcp mcp-transcript live-page adapters

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

# make test runs the race-enabled suite with all of go vet's checks (go test -vet=all
# vets the packages as built for the tests, so vet needs no second build of them)
# and, beside it at a low priority, staticcheck, revive and the adapters, which
# compile the non-race builds and the provider SDKs while the suite's tests wait
# on their processes and timers. Any failure fails the target; the side jobs'
# output follows the suite's.
test: fmt-check ## gofmt check; race-enabled suite with all of vet; beside it staticcheck, revive and the adapters (TESTFLAGS adds go test flags)
	@rm -f .test-side.log; \
	( nice -n 19 $(MAKE) --no-print-directory lint-static adapters > .test-side.log 2>&1; echo $$? > .test-side.rc ) & \
	side=$$!; \
	$(GO) test -race -vet=all -count=1 $(TESTFLAGS) $(PKGS); suite=$$?; \
	wait $$side; rc=$$(cat .test-side.rc); \
	echo "== lint (staticcheck, revive) and adapters"; cat .test-side.log; rm -f .test-side.log .test-side.rc; \
	[ $$suite -eq 0 ] && [ $$rc -eq 0 ]

adapters: ## each provider adapter module (tools/adapters/*): download, tidy check, race-enabled tests with all of go vet
	@set -e; for m in $(ADAPTERS); do \
		echo "== $$m"; \
		(cd $$m && $(GO) mod download && $(GO) mod tidy -diff && $(GO) test -race -vet=all -count=1 ./...); \
	done

race: ## the test suite under the race detector (same as test, without lint)
	$(GO) test -race -count=1 $(PKGS)

flake: ## the suite FLAKE_COUNT times (-race, -cpu FLAKE_CPU) beside a competing cold-cache go test of the repo
	GO=$(GO) FLAKE_COUNT=$(FLAKE_COUNT) FLAKE_CPU=$(FLAKE_CPU) FLAKE_PKGS="$(FLAKE_PKGS)" ./.ci/flake

bench: ## benchmarks against baselines, one table
	$(GO) run ./bench/cmd/taskrt-bench

.PHONY: cluster-bench cluster-test scopes-bench

cluster-bench: ## remote tasks over NATS next to local ones, and failover times (10 runs each)
	$(GO) run ./bench/cmd/taskrt-cluster-bench

scopes-bench: ## sessionless scopes over three taskrt-mcp frontends: takeover after SIGKILL and partition, forwarding overhead, 1,000 scopes under random frontend kills
	$(GO) run ./bench/cmd/taskrt-scopes-bench

cluster-test: ## only the fault tests of worker nodes (partitions, pauses, crashes, a replicated store); make test runs them too
	$(GO) test -race -count=1 -v -run 'CutOff|Paused|Restarted|ManyOwners|Replicated|StreamLeader|Crash|LostLeases|FailedRenewal|Proxy' ./producers/remote/...

stress: ## randomized stress with invariant checks, 10,000 model-based sequences, and 200 MiB in block mode through a worker
	$(GO) run ./bench/cmd/taskrt-stress -duration $(STRESS_DURATION)
	$(GO) test -run TestModelBased -count=1 -v ./actors -rapid.checks=10000
	$(GO) test -race -run TestBlockModeThroughAWorker -count=1 -v ./producers/remote -block-lines 23301689

killstorm: ## bash containment: /bin/true per mode (0 and 2,000 idle processes elsewhere, 2,000 idle host children) and 2,000 tasks disposed at once, both modes
	$(GO) run ./bench/cmd/taskrt-killstorm -true

soak: ## mixed load; fails if heap, goroutines, fds or processes grow after warm-up
	$(GO) run ./bench/cmd/taskrt-soak -duration $(SOAK_DURATION)

fuzz: ## run every fuzz target for FUZZTIME (default 60s)
	$(GO) test -run='^$$' -fuzz=FuzzToolArgs -fuzztime=$(FUZZTIME) ./tools/
	$(GO) test -run='^$$' -fuzz=FuzzParseScenario -fuzztime=$(FUZZTIME) ./agentsim/
	$(GO) test -run='^$$' -fuzz=FuzzRunScript -fuzztime=$(FUZZTIME) -fuzzminimizetime=50x ./agentsim/

lint: fmt-check lint-static ## gofmt check, go vet, staticcheck, and a doc comment on every exported name
	$(GO) vet $(PKGS)

lint-static: ## staticcheck, and revive's check that every exported name has a doc comment (pinned, via go run)
	$(GO) run $(STATICCHECK) $(PKGS)
	$(GO) run $(REVIVE) -config .ci/revive.toml -set_exit_status $(PKGS)

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tidy-lint: ## fail if go.mod/go.sum are not tidy
	$(GO) mod tidy -diff

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')
