# toolscope — the two commands a newcomer needs:
#   make run    build everything and run the orchestrator on embedded SQLite
#   make test   every test, with -race
# `make help` lists the rest.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go

# Go modules of the workspace (go.work). tools/ stays outside it on purpose.
MODULES := gen internal orchestrator agentctl executors
PKGS := $(foreach m,$(MODULES),./$(m)/...)
# Code generators and linters, built from versions pinned by `tool`
# directives (tools/go.mod for buf, gen/go.mod for the protoc plugins).
TOOLS_BIN := $(CURDIR)/.bin
BUF := $(TOOLS_BIN)/buf
OUT := $(CURDIR)/bin
# The build's version, in every binary make build makes (toolscope version,
# and toolscope-server refuses to serve for another build): Go stamps no VCS
# information in workspace mode.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
STAMP := -X github.com/toolscope/toolscope/internal/version.stamp=$(VERSION)

# The orchestrator always serves on <data-dir>/toolscope.sock (yours only);
# LISTEN adds an authenticated TCP listener (e.g. LISTEN=127.0.0.1:7733).
LISTEN ?=
DATA_DIR ?=

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/toolscope (the CLI), bin/toolscope-server (serve, demo) and a static bin/agentctl, each stamped with VERSION
	$(GO) build -ldflags "$(STAMP)" -o $(OUT)/toolscope ./orchestrator/cmd/toolscope
	$(GO) build -ldflags "$(STAMP)" -o $(OUT)/toolscope-server ./orchestrator/cmd/toolscope-server
	CGO_ENABLED=0 $(GO) build -ldflags "$(STAMP)" -o $(OUT)/agentctl ./agentctl/cmd/agentctl

.PHONY: run
run: build ## the guided demo: the orchestrator on embedded SQLite plus a scenario and the web console (LISTEN=, DATA_DIR=, CONSOLE=)
	$(OUT)/toolscope demo $(if $(LISTEN),--listen $(LISTEN)) $(if $(DATA_DIR),--data-dir $(DATA_DIR)) $(if $(CONSOLE),--console $(CONSOLE))

.PHONY: serve
serve: build ## just the orchestrator (LISTEN=, DATA_DIR=, CONSOLE= e.g. 127.0.0.1:7780)
	$(OUT)/toolscope serve $(if $(LISTEN),--listen $(LISTEN)) $(if $(DATA_DIR),--data-dir $(DATA_DIR)) $(if $(CONSOLE),--console $(CONSOLE))

.PHONY: console-screenshots
console-screenshots: ## retake docs/console/*.png with the console's browser test (needs chromium)
	$(GO) test -count=1 -run '^TestBrowser$$' ./orchestrator/internal/console -args -screenshots

# Reliability tests record one figure per case (testutil.Figure); `make
# test` collects them here and prints them after the run.
FIGURES := $(CURDIR)/bench/figures.txt

# Skipped tests record why (testutil.Skip); `make test` prints them last,
# whether the run passed or not, so no skip goes unseen.
SKIPS := $(CURDIR)/bench/skips.txt

# go test's own per-package timeout (10m) is a wall-clock bound: on a
# loaded 2-core machine one package (orchestrator/cmd/toolscope, with the
# real agent CLIs) ran past it while all its tests were still progressing.
# Tests wait on events with their own hang deadlines; this only catches a
# package that hangs outright.
TEST_TIMEOUT ?= 45m

# What the tests may leave in the temporary directory: go's own build
# directories (removed when each go command ends) and the host-wide agent
# uid claims (internal/agentuid, kept by design). Anything else new there
# after make test is listed: a test's TempDir a killed test kept, an
# agent's or a browser's temporary files (LeaveNothing checks processes,
# session directories, containers and builds per package; this checks the
# whole run). Under CI, where nothing else writes there, it fails the run;
# on a workstation other programs may, so it only warns.
TEST_TMP := $(or $(TMPDIR),/tmp)
TEST_TMP_KEEP := ^(go-build[0-9]+|toolscope-agent-uids(-[0-9]+)?)$$
TEST_TMP_BEFORE := $(CURDIR)/bench/tmp-before.txt

.PHONY: test
test: ## run every test with -race, then print the reliability figures, the skipped tests and anything left in TMPDIR (TEST_TIMEOUT=45m per package)
	@mkdir -p bench && rm -f $(FIGURES) $(SKIPS)
	@ls -A $(TEST_TMP) | sort > $(TEST_TMP_BEFORE)
	@rc=0; TOOLSCOPE_FIGURES=$(FIGURES) TOOLSCOPE_SKIPS=$(SKIPS) $(GO) test -race -count=1 -timeout=$(TEST_TIMEOUT) $(PKGS) || rc=$$?; \
	if [[ -s $(FIGURES) ]]; then echo; echo "== reliability figures (docs/reliability.md)"; sort $(FIGURES); fi; \
	echo; if [[ -s $(SKIPS) ]]; then echo "== skipped tests ($$(wc -l < $(SKIPS))), and why"; sort $(SKIPS); else echo "== skipped tests: none"; fi; \
	left=$$(ls -A $(TEST_TMP) | sort | comm -13 $(TEST_TMP_BEFORE) - | { grep -Ev '$(TEST_TMP_KEEP)' || true; }); \
	echo; if [[ -n $$left ]]; then echo "== $${CI:+FAIL: }new in $(TEST_TMP) since the tests started (left by the tests?):"; echo "$$left"; \
		[[ -z "$${CI:-}" ]] || rc=1; \
	else echo "== left in $(TEST_TMP) by the tests: nothing"; fi; \
	exit $$rc

# The agent tests (orchestrator/cmd/toolscope/agents_test.go) run the real
# Claude Code and Codex, installed from their committed lockfile; the tests
# run npm ci themselves when they are missing.
AGENTS_DIR := orchestrator/cmd/toolscope/testdata/agents

.PHONY: agent-clis
agent-clis: ## install the real agent CLIs the agent tests run (npm ci from the committed lockfile)
	cd $(AGENTS_DIR) && npm ci --no-audit --no-fund

# The agentctl load storm runs alone, so that its 10 s of load on 2 cores
# neither disturbs nor is disturbed by other tests: first under -race, then
# without the race detector, the gap and push rate reported as figures (the starvation guard:
# every client hears list_changed during every 100 pushes).
LOAD_TEST = TOOLSCOPE_LOAD=1 TOOLSCOPE_FIGURES=$(FIGURES) $(GO) test -count=1 -v -run '^TestLoad' ./agentctl/internal/daemon

# The notification tests under CPU hogs: two busy-loop processes compete
# with them for the cores, -race, many times over ("one list_changed per
# effective change" whatever the scheduling, issue 16).
STRESS_TESTS := TestOneNotificationPerEffectiveChange|TestOneNotificationWhateverTheScheduling|TestChurnIsCoalescedButNeverStarved
STRESS_COUNT ?= 30

.PHONY: test-stress
test-stress: ## the list_changed tests under two CPU hogs, -race -count=$(STRESS_COUNT); a few minutes
	@hogs=""; for i in 1 2; do sh -c 'while :; do :; done' & hogs="$$hogs $$!"; done; \
	trap 'kill $$hogs' EXIT INT TERM; \
	$(GO) test -race -count=$(STRESS_COUNT) -timeout=$(TEST_TIMEOUT) -run '^($(STRESS_TESTS)|TestSetProvidersRebuildsLocallyAndNotifiesOnce)$$' ./internal/mcpserver/ ./agentctl/internal/daemon/

.PHONY: test-long
test-long: ## the agentctl load storm, alone: under -race, then without it (every client notified during every 100 pushes, every lister sees the list change; gap and rate are figures); 1–2 min
	@mkdir -p bench
	$(LOAD_TEST) -race | grep -E '^(--- |ok|FAIL|panic)|figure |Error|Messages:'
	$(LOAD_TEST) | grep -E '^(--- |ok|FAIL|panic)|figure |Error|Messages:'

# Benchmarks as PACKAGE:PATTERN:BENCHTIME; each figure is timed against its
# floor in the same process (see docs/benchmarks.md).
BENCHES := \
	./internal/mcpserver:ToolsList:300x \
	./internal/mcpserver:ContextCost:1x \
	./orchestrator/cmd/toolscope:ModelContextCost:1x \
	./agentctl/internal/daemon:SetProvidersToListChanged:100x \
	./agentctl/internal/daemon:Storm:1x \
	./agentctl/internal/daemon:TwoHundredSessions:20x \
	./orchestrator/internal/service:BatchNotifiesEveryLiveSession:1x \
	./executors/local:LaunchToFirstList:20x \
	./executors/local:StartToFirstList:20x \
	./orchestrator/cmd/toolscope:SessionLaunchToFirstList:20x \
	./executors/docker:LaunchToFirstList:10x \
	./executors/remote:LaunchToFirstList:20x \
	./executors/kubernetes:LaunchToFirstList:20x \
	./agentctl/cmd/agentctl:Footprint:1x \
	./agentctl/cmd/agentctl:ListingMemory:1x \
	./orchestrator/internal/store:TaskProvidersAtScale:2000x \
	./orchestrator/internal/store:OpenAtScale:20x \
	./orchestrator/internal/store:PostgresTaskProvidersAtScale:2000x \
	./orchestrator/internal/service:PostgresBatchNotifiesEveryLiveSession:1x \
	./orchestrator/internal/lifecycle:PollingCalls:50x \
	./orchestrator/internal/scrub:Scrub:2000x \
	./orchestrator/internal/toolcalls:ToolCallAudit:500x \
	./internal/checkout:Workspace:5x

.PHONY: bench
bench: ## run the benchmarks against their floors; writes docs/benchmarks.md and bench/results.json
	@mkdir -p bench
	@: > bench/raw.txt
	@for b in $(BENCHES); do \
		IFS=: read -r pkg pattern benchtime <<< "$$b"; \
		echo "== $$pkg $$pattern ($$benchtime)" >&2; \
		$(GO) test -run '^$$' -bench "^Benchmark$$pattern\$$" -benchtime "$$benchtime" "$$pkg" | tee -a bench/raw.txt >&2; \
	done
	$(GO) run ./internal/cmd/benchreport -md docs/benchmarks.md -json bench/results.json < bench/raw.txt

.PHONY: bench-smoke
bench-smoke: export TOOLSCOPE_BENCH_SMOKE=1
bench-smoke: ## run every benchmark once, writing nothing: proves they still run (CI)
	@for b in $(BENCHES); do \
		IFS=: read -r pkg pattern benchtime <<< "$$b"; \
		$(GO) test -run '^$$' -bench "^Benchmark$$pattern\$$" -benchtime 1x "$$pkg" > /dev/null || { echo "benchmark $$pattern in $$pkg failed" >&2; \
			$(GO) test -run '^$$' -bench "^Benchmark$$pattern\$$" -benchtime 1x "$$pkg" | tail -20 >&2; exit 1; }; \
	done; echo "every benchmark ran once"

.PHONY: bench-compare
bench-compare: $(TOOLS_BIN)/benchstat ## benchstat: bench/raw.txt as committed at BASE (default HEAD) against the working tree's
	@git show $(or $(BASE),HEAD):bench/raw.txt > bench/raw.base.txt
	$(TOOLS_BIN)/benchstat base=bench/raw.base.txt new=bench/raw.txt

# Fuzz targets as PACKAGE:TARGET. Their seed corpora are committed under
# each package's testdata/fuzz/ and run as plain tests in `make test`.
FUZZ_TARGETS := \
	./internal/providers:FuzzOf \
	./internal/providers:FuzzUnion \
	./orchestrator/internal/api:FuzzRequests \
	./orchestrator/internal/toolcalls:FuzzToolArguments \
	./orchestrator/internal/scrub:FuzzScrub \
	./agentctl/internal/daemon:FuzzToolArgumentsValidation

# A duration -fuzztime can end in a bare "context deadline exceeded" with no
# failing input: a race in Go's fuzz coordinator at its own deadline
# (golang/go#75804, fixed in Go 1.27, not in 1.26). A real failure always
# writes its input ("Failing input written to ..."); only a failure that
# wrote none and says nothing but that is taken for the race, and reported.
.PHONY: fuzz
fuzz: ## fuzz every target for FUZZTIME each (default 30s); records executions as figures
	@mkdir -p bench
	@for t in $(FUZZ_TARGETS); do \
		IFS=: read -r pkg target <<< "$$t"; \
		echo "== fuzz $$target ($$pkg, $(or $(FUZZTIME),30s))" >&2; \
		out=$$($(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(or $(FUZZTIME),30s) "$$pkg" 2>&1) || { \
			if grep -q 'Failing input written to' <<< "$$out" || [[ "$$(grep -E '^--- FAIL|^    ' <<< "$$out" | grep -v '^--- FAIL' | sed 's/^ *//')" != "context deadline exceeded" ]]; then echo "$$out"; exit 1; fi; \
			echo "(the fuzz coordinator's own deadline race, golang/go#75804: no input failed)" >&2; }; \
		last=$$( { grep -o 'elapsed: [^,]*, execs: [0-9]*' <<< "$$out" || true; } | tail -1); \
		[[ -n "$$last" ]] || last="execs: $$( { grep -o 'baseline coverage: [0-9]*' <<< "$$out" || echo 0; } | tail -1 | grep -o '[0-9]*$$') (its seed corpus: FUZZTIME went to the baseline)"; \
		echo "$$last" >&2; \
		echo "fuzz $$target: $${last#*execs: } executions in $(or $(FUZZTIME),30s), no failure" >> $(FIGURES); \
	done

.PHONY: fuzz-short
fuzz-short: ## the short fuzz run CI does (FUZZTIME=5s per target)
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(or $(FUZZTIME),5s)

$(TOOLS_BIN)/benchstat: tools/go.mod tools/go.sum
	cd tools && GOWORK=off $(GO) build -o $(TOOLS_BIN)/ golang.org/x/perf/cmd/benchstat

$(BUF): tools/go.mod tools/go.sum
	cd tools && GOWORK=off $(GO) build -o $(TOOLS_BIN)/ github.com/bufbuild/buf/cmd/buf

$(TOOLS_BIN)/protoc-gen-go $(TOOLS_BIN)/protoc-gen-go-grpc &: gen/go.mod gen/go.sum
	cd gen && GOWORK=off $(GO) build -o $(TOOLS_BIN)/ google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

.PHONY: tools
tools: $(BUF) $(TOOLS_BIN)/protoc-gen-go $(TOOLS_BIN)/protoc-gen-go-grpc ## build the pinned generators

.PHONY: generate
generate: tools ## regenerate gen/ from proto/
	rm -rf gen/toolscope
	PATH="$(TOOLS_BIN):$$PATH" $(BUF) generate

.PHONY: docs
docs: ## regenerate what the tool table (internal/toolapi) states: the tools' schemas and the README's tool table
	$(GO) generate ./internal/toolapi

.PHONY: check-generate
check-generate: generate ## fail if gen/ differs from what proto/ generates
	@if [[ -n "$$(git status --porcelain -- gen/)" ]]; then \
		git status --short -- gen/; git --no-pager diff --stat -- gen/; \
		echo "gen/ is out of date: run 'make generate' and commit the result" >&2; exit 1; fi

.PHONY: lint
lint: $(BUF) ## gofmt, go vet, buf lint and buf format
	@unformatted=$$(gofmt -l $(MODULES) tools | grep -v '^gen/' || true); \
		if [[ -n "$$unformatted" ]]; then echo "gofmt needed:" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) vet $(PKGS)
	$(BUF) lint
	$(BUF) format --diff --exit-code

# buf breaking compares proto/ with a baseline commit: BREAKING_AGAINST if
# set; else, on a branch, where it left main; else (on main itself) the
# commit before HEAD, so the newest change is always checked.
BREAKING_AGAINST ?=

.PHONY: breaking
breaking: $(BUF) ## buf breaking against the main branch (or HEAD~1 on main)
	@against="$(BREAKING_AGAINST)"; \
	if [[ -z "$$against" ]]; then \
		base=$$(git merge-base HEAD main 2>/dev/null || true); \
		if [[ -n "$$base" && "$$base" != "$$(git rev-parse HEAD)" ]]; then against=$$base; \
		elif git rev-parse --verify --quiet HEAD~1 >/dev/null; then against=$$(git rev-parse HEAD~1); \
		else echo "buf breaking: HEAD is the first commit; there is no earlier contract to compare with"; exit 0; fi; \
	fi; \
	echo "buf breaking against $$against"; \
	$(BUF) breaking --against ".git#ref=$$against"

.PHONY: check-imports
check-imports: ## enforce module boundaries (agentctl: no SQLite, no Docker), and the CLI builds for macOS
	@bad=$$($(GO) list -deps ./agentctl/... | grep -E '^(modernc\.org/sqlite|github\.com/docker/|github\.com/pressly/goose)' || true); \
		if [[ -n "$$bad" ]]; then echo "agentctl must not depend on:" >&2; echo "$$bad" >&2; exit 1; fi
	@bad=$$($(GO) list -deps ./gen/... | grep -E '^github\.com/toolscope/toolscope/(internal|orchestrator|agentctl|executors)' || true); \
		if [[ -n "$$bad" ]]; then echo "gen must not import the project:" >&2; echo "$$bad" >&2; exit 1; fi
	@for p in model store service events; do \
		bad=$$($(GO) list -deps ./orchestrator/internal/$$p | grep -E '^google\.golang\.org/grpc/(status|codes)$$' || true); \
		if [[ -n "$$bad" ]]; then echo "orchestrator/internal/$$p must not use gRPC status codes (errdefs only):" >&2; echo "$$bad" >&2; exit 1; fi; \
	done
	@bad=$$($(GO) list -deps ./executors | grep -E '^google\.golang\.org/(grpc|protobuf)' || true); \
		if [[ -n "$$bad" ]]; then echo "the executors interface must speak domain types, not gRPC/protobuf:" >&2; echo "$$bad" | head -3 >&2; exit 1; fi
	@GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./orchestrator/cmd/toolscope || { echo "the toolscope command line must build for macOS (ADR 0035: a laptop drives a remote orchestrator)" >&2; exit 1; }
	@echo "module boundaries hold; the command line builds for macOS"

.PHONY: tidy-check
tidy-check: ## fail if any go.mod/go.sum is not tidy
	@for m in $(MODULES) tools tools/kubernetes; do (cd $$m && GOWORK=off $(GO) mod tidy); done
	@if [[ -n "$$(git status --porcelain -- '*go.mod' '*go.sum')" ]]; then \
		git --no-pager diff -- '*go.mod' '*go.sum'; echo "run 'go mod tidy' in the modules above and commit" >&2; exit 1; fi

.PHONY: check
check: lint check-generate breaking check-imports tidy-check ## every static check CI runs

.PHONY: ci
ci: check test test-long bench-smoke fuzz-short ## what .ci/run runs

.PHONY: ci-fresh
ci-fresh: ## .ci/run on a fresh clone of HEAD as a brand-new machine sees it: the tests' Docker images and containers removed, ~/.cache/toolscope moved aside, empty Go and npm caches (hack/ci-fresh.sh); 31 to 56 min so far
	hack/ci-fresh.sh

.PHONY: clean
clean: ## remove built binaries and tools
	rm -rf $(OUT) $(TOOLS_BIN)
