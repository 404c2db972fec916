# idem — developer targets. Every target works on a bare machine (embedded
# miniredis and SQLite); real services are used when they are reachable, and
# required when IDEM_REQUIRE_SERVICES=1.

GO        ?= go
# MODULES are the modules of the repository, tied together by go.work: the
# core, each integration, and the test, benchmark and demo modules.
MODULES   := . ./middleware/idemgin ./middleware/idemecho ./idemgrpc ./idemwatermill ./idempgx ./idemprom ./idemotel ./reliability ./bench ./cmd/idem ./cmd/idemdemo ./examples/pgxsqlc ./examples/databasesql
PKGS      ?= $(addsuffix /...,$(MODULES))
FUZZTIME  ?= 30s
BENCHTIME ?= 1s
COUNT     ?= 6
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

.PHONY: test test-race fuzz-agree backends modules apicheck apicheck-test lint fuzz bench bench-all bench-floors bench-chart soak soak-consumer soak-consumer-pgx soak-watermill soak-locks queue-load infra-galera infra-redis-cluster infra-kafka infra-pg

# test: every package of every module under the race detector, after saying
# which backends this run has and checking that each module stands alone;
# then the fuzzers that hold two implementations of one thing together.
test: backends modules test-race fuzz-agree

# QUEUEMESSAGES is how many messages make test sends through the JetStream
# redelivery load (TestConsumerJetStreamRedeliveries); make queue-load runs
# the full 10,000.
QUEUEMESSAGES ?= 1000
# TESTP is how many test binaries build or run at once. Most of the suite
# waits on servers and timers, not the CPU: four at once keep a 2-core
# machine busy where two left it idle between links.
TESTP ?= 4
# The reliability module (the soaks, the brokers, the property model) runs
# alone after the rest: its processes and fault injection want the machine's
# headroom, and waiting on them is most of what it does anyway.
test-race:
	$(GO) test -race -count=1 -p $(TESTP) -timeout 14m $(filter-out ./reliability/...,$(PKGS))
	IDEM_CONSUMER_MESSAGES=$(QUEUEMESSAGES) $(GO) test -race -count=1 -timeout 14m ./reliability/...

# modules: each module's go.mod is tidy and the module builds without the
# workspace, as a user who requires it alone gets it.
modules:
	@for m in $(MODULES); do \
	  (cd $$m && GOWORK=off $(GO) mod tidy -diff >/dev/null && GOWORK=off $(GO) build ./... && GOWORK=off $(GO) vet ./...) \
	    || { echo "module $$m: go.mod is not tidy, or the module does not build on its own"; exit 1; }; \
	done

# apicheck: the exported API of each library module against its latest
# release tag (vX.Y.Z, or DIR/vX.Y.Z for the module in DIR); an incompatible
# change without a major version bump fails. apicheck-test proves the check
# on a throwaway repository.
apicheck:
	bash .ci/apicheck

apicheck-test:
	bash .ci/apicheck_test

# fuzz-agree: each pair of implementations that must agree, fuzzed for a
# number of inputs, so that a change to one side alone fails make test (the
# seeds already run under test-race): the fingerprint's stream writer
# against its token parser, the SQL layer's batched claims and completions,
# and its batched events, against its single statements, on every backend
# at hand. A count, not a duration: with -fuzztime as a duration, the Go
# 1.26 fuzzing coordinator can fail a clean run with "context deadline
# exceeded" when its deadline meets a worker still busy, which a loaded
# machine makes likely; a count has no deadline. Minimising an input that
# widens coverage runs in a few tries, not the default minute, so that the
# SQL fuzzers keep fuzzing. The fuzz build instruments every package, the
# drivers' too: the first run on a machine builds for a few minutes, later
# ones take the build cache.
AGREESTREAM ?= 50000x
AGREESQL ?= 500x
fuzz-agree:
	$(GO) test -run '^$$' -fuzz '^FuzzStream$$' -fuzztime $(AGREESTREAM) -fuzzminimizetime 100x ./fingerprint/
	$(GO) test -run '^$$' -fuzz '^FuzzBatchAgreesWithSingle$$' -fuzztime $(AGREESQL) -fuzzminimizetime 10x ./sqllayer/
	$(GO) test -run '^$$' -fuzz '^FuzzEventBatchAgreesWithSingle$$' -fuzztime $(AGREESQL) -fuzzminimizetime 10x ./sqllayer/

backends:
	@$(GO) test -count=1 -v -run '^TestBackends$$' ./internal/testkit/testenv | grep -E '^\s+testenv_test.go' || true

# lint: gofmt, go vet, staticcheck and golangci-lint (.golangci.yml: the
# linters that staticcheck and vet do not cover) over every module. Each
# linter is pinned and run with go run at its version, so that lint never
# depends on what is installed and never skips one: the first run on a
# machine fetches and builds them (a few minutes), later runs take the
# build cache.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOLANGCI    ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	$(GOLANGCI) run $(PKGS)

# fuzz: each fuzz target for FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# soak: the mixed load over real HTTP under every fault, for SOAKTIME, on
# three service processes; it prints the history's size, the faults per
# kind and the anomalies found, and fails on any. make test runs a short
# seed of it (8 s, under the race detector). This long run goes without
# the race detector: most of its worth is in the number of calls and
# faults, which -race would cut several times over. SOAKSEED picks the
# seed; IDEM_SOAK_KEEP=dir keeps the history of a failed run. SOAKATOMIC=1
# runs the Stores in the atomic mode (tiered.WithAtomic): every execution
# writes its charge in the transaction that claims and completes its key,
# the chi instances run the standard mode on the same table (mixed modes),
# and the nemesis also kills owners' processes mid-transaction.
SOAKTIME ?= 60s
SOAKSEED ?= 1
SOAKATOMIC ?= 0
soak:
	IDEM_SOAK_TIME=$(SOAKTIME) IDEM_SOAK_SEED=$(SOAKSEED) IDEM_SOAK_ATOMIC=$(SOAKATOMIC) $(GO) test -run '^TestSoak$$' -count=1 -v -timeout 30m ./reliability/

# soak-locks: the atomic mode's soak on MariaDB, SOAKCALLS payments (default
# 50,000) with SOAKSEED: deadlock victims and lock-wait timeouts inside
# handlers that sometimes write on, and a standard-mode Store on the same
# table; it prints the calls, each fault's count and the anomalies, and
# fails on any. make test runs 800 payments of it under the race detector.
SOAKCALLS ?= 50000
soak-locks:
	IDEM_SOAK_LOCKS_CALLS=$(SOAKCALLS) IDEM_SOAK_SEED=$(SOAKSEED) $(GO) test -run '^TestSoakAtomicLocks$$' -count=1 -v -timeout 30m ./reliability/

# infra-galera: idem on a three-node MariaDB Galera cluster of its own
# (reliability/infra/galera.sh; the machine's MariaDB is left alone),
# after installing what it needs from the distribution's packages: two
# Stores on different nodes claiming one key at once, a duplicate on
# another node after the owner's commit under each wsrep_sync_wait, and
# the soak in the standard and the atomic mode, GALERACALLS calls each
# (at least) while a node is killed and restarted GALERAKILLS times; it
# prints the calls, the kills and the anomalies, and fails on any. make
# test runs a short seed of it (1,500 calls, one kill per mode).
GALERACALLS ?= 20000
GALERAKILLS ?= 6
infra-galera:
	bash reliability/infra/galera.sh install
	IDEM_REQUIRE_SERVICES=1 IDEM_GALERA_CALLS=$(GALERACALLS) IDEM_GALERA_KILLS=$(GALERAKILLS) IDEM_SOAK_SEED=$(SOAKSEED) $(GO) test -run '^TestGalera$$' -count=1 -v -timeout 40m ./reliability/

# infra-pg: the soak on a pg_auto_failover formation (a monitor and two
# Postgres nodes on ports 55432-55434, started by reliability/infra/pgaf.sh,
# which installs the distribution's pg_auto_failover packages when they are
# missing), through a multi-host DSN, while the primary is switched over,
# killed (the standby promoted) and crashed, at least five times each:
# three runs of PGTIME each with SOAKSEED — a synchronous standby in the
# standard and in the atomic mode, which must show no anomaly, and an
# asynchronous standby a second behind at each kill, whose lost commits
# the run counts and classifies. make test runs a short seed of it.
PGTIME ?= 150s
infra-pg:
	IDEM_SOAK_TIME=$(PGTIME) IDEM_SOAK_SEED=$(SOAKSEED) $(GO) test -run '^TestSoakFailover$$' -count=1 -v -timeout 60m ./reliability/

# soak-consumer: the soak's consumer variant, for SOAKTIME with SOAKSEED:
# messages through three consumer processes on an embedded JetStream
# broker, with the broker's redeliveries, consumer kills and a publisher's
# retries; it prints the messages, deliveries, redelivery ratio, effects
# and anomalies, and fails on any anomaly. make test runs a short seed of
# it (6 s, under the race detector); this run goes without it.
soak-consumer:
	IDEM_SOAK_CONSUMER_TIME=$(SOAKTIME) IDEM_SOAK_CONSUMER_SEED=$(SOAKSEED) $(GO) test -run '^TestSoakConsumer$$' -count=1 -v -timeout 30m ./reliability/

# soak-consumer-pgx: the consumer soak with consumers on pgx (idempgx's
# InTx on a pgxpool: the processed event marked in the pgx.Tx of the
# effect, no Store), for SOAKTIME with SOAKSEED, against Postgres; it
# prints the same figures and fails on any anomaly. make test runs a short
# seed of it (6 s, under the race detector).
soak-consumer-pgx:
	IDEM_SOAK_CONSUMER_PGX_TIME=$(SOAKTIME) IDEM_SOAK_CONSUMER_PGX_SEED=$(SOAKSEED) $(GO) test -run '^TestSoakConsumerPgx$$' -count=1 -v -timeout 30m ./reliability/

# soak-watermill: the consumer soak with Watermill's Timeout and Retry in
# the chain (before idem's on one router, after it on the other) and a SQL
# tier that stalls, for SOAKTIME with SOAKSEED; it prints the messages,
# redeliveries and stalls, and fails on a lost message or a lost or altered
# produced message. make test runs a short seed of it (3 s).
soak-watermill:
	IDEM_SOAK_WM_TIME=$(SOAKTIME) IDEM_SOAK_WM_SEED=$(SOAKSEED) $(GO) test -run '^TestSoakConsumerMiddlewares$$' -count=1 -v -timeout 30m ./reliability/

# queue-load: 10,000 messages through three consumer processes on an
# embedded JetStream broker, at least a fifth of them redelivered (handler
# failures, handlers that outlast the AckWait, consumers killed and
# restarted): exactly one effect per message, every message acked.
queue-load:
	IDEM_CONSUMER_MESSAGES=10000 $(GO) test -race -run '^TestConsumerJetStreamRedeliveries$$' -count=1 -v -timeout 30m ./reliability/

# need installs a distribution package when its command is missing (Debian
# and Ubuntu: apt-get, through sudo unless already root).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
need = @command -v $(1) >/dev/null 2>&1 || { echo "installing $(2)"; $(SUDO) apt-get install -y $(2); }

# infra-redis-cluster: the Redis Cluster soak — three Stores on a cluster
# of three masters with a replica each (six redis-server processes of the
# test's own, on free ports) and Postgres, CLUSTERCALLS calls (default
# 20,000) while a master is killed and CLUSTER FAILOVER is forced,
# CLUSTERFAULTS times each (default 5); it prints the history's checker
# report and the share of answers that fell back to SQL during the
# switches, and fails on any anomaly. make test runs a short seed of it
# (2,000 calls, one fault of each kind, under the race detector).
CLUSTERCALLS ?= 20000
CLUSTERFAULTS ?= 5
infra-redis-cluster:
	$(call need,redis-server,redis-server)
	$(call need,redis-cli,redis-tools)
	IDEM_SOAK_CLUSTER_CALLS=$(CLUSTERCALLS) IDEM_SOAK_CLUSTER_FAULTS=$(CLUSTERFAULTS) IDEM_SOAK_SEED=$(SOAKSEED) $(GO) test -run '^TestSoakRedisCluster$$' -count=1 -v -timeout 30m ./reliability/

# infra-kafka: the Kafka consumer group on kfake (franz-go's in-process
# implementation of the Kafka protocol: no Kafka server to install) with
# franz-go clients: KAFKAMESSAGES events (default 10,000) through a group
# of three whose members die between their transactions and their offset
# commits, and a publisher's retries; it prints the deliveries, the share
# redelivered and the effects, and fails unless each event had exactly one
# effect. make test runs it with 1,000 events.
KAFKAMESSAGES ?= 10000
infra-kafka:
	IDEM_KAFKA_MESSAGES=$(KAFKAMESSAGES) $(GO) test -race -run '^TestConsumerKafka' -count=1 -v -timeout 30m ./reliability/

# bench: the side-by-side suite (idem against hand-written baselines), COUNT
# times, as a benchstat table with one column per implementation. Embedded
# backends unless IDEM_REDIS_URL / IDEM_POSTGRES_DSN name real ones.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) ./bench/ | tee bench.txt
	$(BENCHSTAT) -col /impl bench.txt

# bench-floors: each path against its floor (docs/benchmarks.md, "Each path
# against its floor"): the fingerprint, a 1 MiB body through the
# middleware, the in-memory paths at 1 and 16 goroutines, and claims beside
# a janitor's sweep of 100,000 rows, COUNT runs of -count 1 one after the
# other so that a change of the machine's load falls on every
# implementation alike, with the load average before each run; then the
# benchstat tables and the chart. Postgres when IDEM_POSTGRES_DSN names one.
FLOORS = ^(BenchmarkFingerprint|BenchmarkHTTPBody|BenchmarkMemory)$$
bench-floors:
	cd bench && $(GO) test -c -o floors.test . && rm -f ../docs/benchmarks.txt && \
	for i in $$(seq $(COUNT)); do \
	  echo "# run $$i: $$(uptime)" >> ../docs/benchmarks.txt; \
	  ./floors.test -test.run '^$$' -test.bench '$(FLOORS)' -test.benchmem -test.benchtime $(BENCHTIME) >> ../docs/benchmarks.txt && \
	  ./floors.test -test.run '^$$' -test.bench '^BenchmarkJanitor$$' -test.benchmem -test.benchtime 1x >> ../docs/benchmarks.txt || exit 1; \
	done; rm -f floors.test
	$(BENCHSTAT) -col /impl docs/benchmarks.txt
	$(MAKE) bench-chart

# bench-chart: docs/benchmarks.svg, each path's ratio to its floor with its
# spread, drawn from the output of make bench-floors (docs/benchmarks.txt).
bench-chart:
	cd bench && $(GO) run ./cmd/chart -o ../docs/benchmarks.svg ../docs/benchmarks.txt

# bench-all: every benchmark of every package.
bench-all:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) $(PKGS) | tee bench-all.txt
	$(BENCHSTAT) bench-all.txt
