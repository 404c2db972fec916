// Package sqllayer is the SQL tier of idem: an idem.Layer over uptrace/bun
// that makes the final yes/no decision with a row under a unique key,
// written before any side effect and changed only by its owner's token.
// Postgres (pgdialect), SQLite (sqlitedialect, the embedded default) and
// MySQL/MariaDB (mysqldialect) are supported.
package sqllayer
