# idem — developer targets. Every target works on a bare machine (embedded
# miniredis and SQLite); real services are used when they are reachable, and
# required when IDEM_REQUIRE_SERVICES=1.

GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
COUNT     ?= 6
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

.PHONY: test test-race backends lint fuzz bench bench-all soak

# test: every package under the race detector, after saying which backends
# this run has.
test: backends test-race

test-race:
	$(GO) test -race -count=1 -timeout 14m $(PKGS)

backends:
	@$(GO) test -count=1 -v -run '^TestBackends$$' ./internal/testenv | grep -E '^\s+testenv_test.go' || true

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@if command -v golangci-lint >/dev/null 2>&1; then golangci-lint run $(PKGS); else echo "golangci-lint not installed: skipped"; fi

# fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# soak: the long mixed-load run under faults (not part of make test).
SOAKTIME ?= 60s
soak:
	IDEM_SOAK_TIME=$(SOAKTIME) $(GO) test -race -tags soak -run '^TestSoak' -count=1 -v -timeout 15m ./reliability/

# bench: the side-by-side suite (idem against hand-written baselines), COUNT
# times, as a benchstat table with one column per implementation. Embedded
# backends unless IDEM_REDIS_URL / IDEM_POSTGRES_DSN name real ones.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) ./bench/ | tee bench.txt
	$(BENCHSTAT) -col /impl bench.txt

# bench-all: every benchmark of every package.
bench-all:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) $(PKGS) | tee bench-all.txt
	$(BENCHSTAT) bench-all.txt
