// Package bench holds idem's benchmarks that put the library side by side
// with hand-written baselines in one run: raw Redis (SET NX PX, GET), raw SQL
// (INSERT … ON CONFLICT DO NOTHING, UPDATE, SELECT by primary key), each
// layer alone, the tiered Store (new keys, cold duplicates, hot replays,
// 20-way bursts) and the HTTP middleware over loopback.
//
// Every benchmark is named …/impl=baseline and …/impl=idem for the same
// operation (BenchmarkConsumer has four: impl=none, impl=dedup for
// Watermill's own Deduplicator, impl=idem-mem and impl=idem-tiers), so that
//
//	go test -run '^$' -bench . -benchmem -count 6 ./bench/ > bench.txt
//	benchstat -col /impl bench.txt
//
// prints the two side by side with the difference (make bench does both).
// Some operations add impl=floor: the least any implementation could cost
// on the machine, written by hand (see each benchmark). BenchmarkTiersPaired
// alone runs its implementations in turns within one benchmark and reports
// their ratios as metrics, for a machine whose load moves faster than a
// benchmark runs.
// Backends are embedded (miniredis, a SQLite file) unless IDEM_REDIS_URL or
// IDEM_POSTGRES_DSN name real ones.
package bench
