package main

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
)

// keyFlags name a key: --scope and the client key, or --digest.
type keyFlags struct{ scope, digest string }

func bindKey(fs *flag.FlagSet) *keyFlags {
	k := &keyFlags{}
	fs.StringVar(&k.scope, "scope", "", `the key's scope, as the service names it ("" for none)`)
	fs.StringVar(&k.digest, "digest", "", "the key's digest (64 hexadecimal characters), instead of --scope and KEY")
	return k
}

// key returns the key the flags and the one positional argument name.
func (k *keyFlags) key(args []string) (idem.Key, error) {
	switch {
	case k.digest != "" && (len(args) > 0 || k.scope != ""):
		return idem.Key{}, usagef("give --digest alone, or --scope and KEY")
	case k.digest != "":
		key, err := idem.KeyFromHex(strings.ToLower(k.digest))
		if err != nil {
			return idem.Key{}, usagef("--digest: %v", err)
		}
		return key, nil
	case len(args) != 1:
		return idem.Key{}, usagef("give one KEY (the client key) with --scope, or --digest (got %d arguments)", len(args))
	}
	return idem.NewKey(k.scope, args[0]), nil
}

// view is one tier's record as the command prints it.
type view struct {
	Tier        string     `json:"tier"`
	Found       bool       `json:"found"`
	Error       string     `json:"error,omitempty"`
	Digest      string     `json:"digest"`
	Scope       *string    `json:"scope,omitempty"`      // SQL only
	ClientKey   *string    `json:"client_key,omitempty"` // SQL only
	State       string     `json:"state,omitempty"`
	Grace       bool       `json:"grace,omitempty"`
	Expired     bool       `json:"expired,omitempty"`
	Fingerprint string     `json:"fingerprint,omitempty"`
	Token       string     `json:"token,omitempty"`
	AgeMS       *int64     `json:"age_ms,omitempty"` // SQL only
	LeaseLeftMS *int64     `json:"lease_left_ms,omitempty"`
	ExpiresInMS int64      `json:"expires_in_ms,omitempty"`
	CreatedAt   *time.Time `json:"created_at,omitempty"`
	LeaseUntil  *time.Time `json:"lease_until,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	Answer      *answer    `json:"answer,omitempty"`
}

func ms(d time.Duration) *int64 { v := d.Milliseconds(); return &v }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func sqlView(e sqllayer.Entry) view {
	v := view{Tier: "sql", Found: true, Digest: e.Key.Hex(), Scope: &e.Scope, ClientKey: &e.ClientKey, State: e.State.String(),
		Grace: e.Grace, Expired: e.Expired(), Fingerprint: e.Fingerprint, Token: e.Token, AgeMS: ms(e.Age()),
		ExpiresInMS: e.ExpiresAt.Sub(e.Now).Milliseconds(), CreatedAt: timePtr(e.CreatedAt), LeaseUntil: timePtr(e.LeaseUntil),
		ExpiresAt: timePtr(e.ExpiresAt)}
	if e.State == idem.StateInProgress {
		v.LeaseLeftMS = ms(e.LeaseLeft())
	} else {
		v.Answer = decodeAnswer(e.Result)
	}
	return v
}

func redisView(e redislayer.Entry) view {
	v := view{Tier: "redis", Found: true, Digest: e.Key.Hex(), State: e.State.String(), Grace: e.Grace,
		Fingerprint: e.Fingerprint, Token: e.Token, ExpiresInMS: e.ExpiresIn.Milliseconds(),
		LeaseUntil: timePtr(e.LeaseUntil), ExpiresAt: timePtr(e.ExpiresAt)}
	if e.State == idem.StateInProgress {
		v.LeaseLeftMS = ms(e.LeaseLeft)
	} else {
		v.Answer = decodeAnswer(e.Result)
	}
	return v
}

// status is how a table says where a record stands.
func (v view) status() string {
	switch {
	case v.Error != "":
		return "error: " + v.Error
	case !v.Found:
		return "absent"
	case v.Expired:
		return v.State + ", expired (awaiting the janitor)"
	case v.LeaseLeftMS != nil && *v.LeaseLeftMS <= 0 && v.Grace:
		return v.State + ", lease and grace lapsed"
	case v.LeaseLeftMS != nil && *v.LeaseLeftMS <= 0:
		return v.State + ", lease lapsed"
	case v.Grace:
		return v.State + ", in a grace"
	}
	return v.State
}

func (v view) leaseLeft() string {
	if v.LeaseLeftMS == nil {
		return "-"
	}
	return human(time.Duration(*v.LeaseLeftMS) * time.Millisecond)
}

func (v view) age() string {
	if v.AgeMS == nil {
		return "-"
	}
	return human(time.Duration(*v.AgeMS) * time.Millisecond)
}

// short cuts s to n characters for a table.
func short(s string, n int) string {
	if s == "" {
		return "-"
	}
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// quoted prints a label for a table: quoted, so that "" and spaces show.
func quoted(p *string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%q", *p)
}

// table writes rows aligned in columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// printJSON writes v as one indented JSON document.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printable returns b as text when it is printable ASCII, else in hex.
func printable(b []byte) string {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\t' && c != '\r' {
			return "hex " + hex.EncodeToString(b)
		}
	}
	return fmt.Sprintf("%q", b)
}

func (v view) expiresIn() string {
	if !v.Found {
		return "-"
	}
	return human(time.Duration(v.ExpiresInMS) * time.Millisecond)
}
