package sqllayer

import (
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"reflect"
	"strconv"
	"strings"
)

// MUST AGREE with the values the single statements bind: a column sent as
// an array, binary or in its text form, carries each value byte for byte.
// TestArrayTextForms and TestBatchesInTextForm pin the text forms;
// FuzzBatchAgreesWithSingle (batch_fuzz_test.go) and
// FuzzEventBatchAgreesWithSingle (batch_events_fuzz_test.go) compare
// batched and single calls under make test.

// Postgres batches send each column as one array argument. pgx's
// database/sql driver binds Go slices as arrays itself, in binary; other
// drivers get the array's text form, which the statement's cast parses.

// bindsSlices reports whether db's driver binds Go slices as Postgres
// arrays: pgx's database/sql driver, found by its package without
// importing it.
func bindsSlices(db *sql.DB) bool {
	t := reflect.TypeOf(db.Driver())
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return false
	}
	p := t.PkgPath()
	return strings.HasPrefix(p, "github.com/jackc/pgx/") && strings.HasSuffix(p, "/stdlib")
}

// byteaArray, textArray and int8Array are array arguments in text form,
// for drivers that do not bind slices.
type (
	byteaArray [][]byte
	textArray  []string
	int8Array  []int64
)

// Value implements driver.Valuer: {"\\x0a1b",…}.
func (a byteaArray) Value() (driver.Value, error) {
	var b strings.Builder
	b.Grow(2 + len(a)*8)
	b.WriteByte('{')
	for i, v := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"\\x`)
		b.WriteString(hex.EncodeToString(v))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String(), nil
}

// Value implements driver.Valuer: every element quoted, with its quotes
// and backslashes escaped.
func (a textArray) Value() (driver.Value, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for j := range len(v) {
			if v[j] == '"' || v[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(v[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String(), nil
}

// Value implements driver.Valuer: {1,2,…}.
func (a int8Array) Value() (driver.Value, error) {
	b := make([]byte, 0, 2+len(a)*10)
	b = append(b, '{')
	for i, v := range a {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return string(append(b, '}')), nil
}

// byteaArg, textArg and int8Arg return an array argument for the layer's
// driver.
func (l *Layer) byteaArg(a [][]byte) any {
	if l.slices {
		return a
	}
	return byteaArray(a)
}

func (l *Layer) textArg(a []string) any {
	if l.slices {
		return a
	}
	return textArray(a)
}

func (l *Layer) int8Arg(a []int64) any {
	if l.slices {
		return a
	}
	return int8Array(a)
}
