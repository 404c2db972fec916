package idem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// codecVersion is the first byte of every encoded record. A layer that reads
// a version it does not know reports ErrCodec instead of guessing.
const codecVersion = 1

// ErrCodec reports bytes that are not a record this version can decode.
var ErrCodec = errors.New("idem: malformed record encoding")

const (
	flagHasResult = 1 << iota // Result is non-nil (possibly empty)
)

// MarshalRecord encodes r in a compact, versioned binary form. Labels of the
// key (scope, client key) are not encoded; the digest is.
//
// Layout (version 1): version byte, state byte, flags byte, 32-byte digest,
// uvarint-prefixed fingerprint, token and result, then LeaseUntil and
// ExpiresAt as big-endian Unix nanoseconds (0 for the zero time).
func MarshalRecord(r Record) []byte {
	n := 3 + KeySize + 3*binary.MaxVarintLen64 + len(r.Fingerprint) + len(r.Token) + len(r.Result) + 16
	return AppendRecord(make([]byte, 0, n), r)
}

// AppendRecord appends the encoding of r (see MarshalRecord) to b.
func AppendRecord(b []byte, r Record) []byte {
	var flags byte
	if r.Result != nil {
		flags |= flagHasResult
	}
	b = append(b, codecVersion, byte(r.State), flags)
	b = append(b, r.Key.digest[:]...)
	b = binary.AppendUvarint(b, uint64(len(r.Fingerprint)))
	b = append(b, r.Fingerprint...)
	b = binary.AppendUvarint(b, uint64(len(r.Token)))
	b = append(b, r.Token...)
	b = binary.AppendUvarint(b, uint64(len(r.Result)))
	b = append(b, r.Result...)
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(r.LeaseUntil)))
	b = binary.BigEndian.AppendUint64(b, uint64(unixNano(r.ExpiresAt)))
	return b
}

// UnmarshalRecord decodes bytes made by MarshalRecord. The Result of the
// returned record does not alias b. Malformed input gives ErrCodec, never a
// panic.
func UnmarshalRecord(b []byte) (Record, error) {
	var r Record
	if len(b) < 3+KeySize {
		return Record{}, fmt.Errorf("%w: %d bytes is too short", ErrCodec, len(b))
	}
	if b[0] != codecVersion {
		return Record{}, fmt.Errorf("%w: unknown version %d", ErrCodec, b[0])
	}
	r.State = State(b[1])
	if r.State != StateInProgress && r.State != StateCompleted {
		return Record{}, fmt.Errorf("%w: unknown state %d", ErrCodec, b[1])
	}
	flags := b[2]
	if flags&^flagHasResult != 0 {
		return Record{}, fmt.Errorf("%w: unknown flags %#x", ErrCodec, flags)
	}
	copy(r.Key.digest[:], b[3:3+KeySize])
	b = b[3+KeySize:]
	var fp, tok, res []byte
	var err error
	if fp, b, err = field(b, "fingerprint"); err != nil {
		return Record{}, err
	}
	if tok, b, err = field(b, "token"); err != nil {
		return Record{}, err
	}
	if res, b, err = field(b, "result"); err != nil {
		return Record{}, err
	}
	if len(b) != 16 {
		return Record{}, fmt.Errorf("%w: %d trailing bytes, want 16", ErrCodec, len(b))
	}
	r.Fingerprint = string(fp)
	r.Token = string(tok)
	if flags&flagHasResult != 0 {
		r.Result = append([]byte{}, res...)
	} else if len(res) != 0 {
		return Record{}, fmt.Errorf("%w: result bytes without result flag", ErrCodec)
	}
	r.LeaseUntil = fromUnixNano(int64(binary.BigEndian.Uint64(b[:8])))
	r.ExpiresAt = fromUnixNano(int64(binary.BigEndian.Uint64(b[8:])))
	return r, nil
}

func field(b []byte, name string) (v, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: bad %s length", ErrCodec, name)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
