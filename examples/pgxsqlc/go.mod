module github.com/idemkit/idem/examples/pgxsqlc

go 1.25.0

require (
	github.com/go-chi/chi/v5 v5.3.0
	github.com/idemkit/idem v0.0.0-00010101000000-000000000000
	github.com/idemkit/idem/idempgx v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.10.0
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.1.1 // indirect
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/go-sql-driver/mysql v1.8.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.2 // indirect
	github.com/jinzhu/inflection v1.0.0 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	github.com/redis/go-redis/v9 v9.17.1 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	github.com/tmthrgd/go-hex v0.0.0-20190904060850-447a3041c3bc // indirect
	github.com/uptrace/bun v1.2.16 // indirect
	github.com/uptrace/bun/dialect/mysqldialect v1.2.16 // indirect
	github.com/uptrace/bun/dialect/pgdialect v1.2.16 // indirect
	github.com/uptrace/bun/dialect/sqlitedialect v1.2.16 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	golang.org/x/mod v0.40.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.39.0 // indirect
	modernc.org/libc v1.74.1 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.54.0 // indirect
)

replace (
	github.com/idemkit/idem => ../..
	github.com/idemkit/idem/idempgx => ../../idempgx
)
