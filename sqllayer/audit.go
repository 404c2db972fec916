package sqllayer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// Note says who freed a record and why: what every audit row carries.
type Note struct {
	// By is who acted: an operator's name, the OS user running the idem
	// command, a service's admin principal. Required.
	By string
	// Reason is why, in the operator's words. Required.
	Reason string
}

// errNote reports a Note without its who or its why.
var errNote = errors.New("sqllayer: an audit note needs who (By) and why (Reason)")

func (n Note) valid() error {
	if n.By == "" || n.Reason == "" {
		return errNote
	}
	return nil
}

// AuditEntry is one row of the audit table: one release or forget of one
// tier's record.
type AuditEntry struct {
	Note
	// At is when it was recorded, by the database's clock (set by the
	// database; ignored by Record).
	At time.Time
	// Action is "release" or "forget".
	Action string
	// Tier is the tier whose record was acted on.
	Tier idem.Tier
	// Outcome is what the action did.
	Outcome Outcome
	// Key is the record's key; its labels, when it has them, are stored
	// too. A key read back has the stored labels in Scope and ClientKey.
	Key              idem.Key
	Scope, ClientKey string
	// Token is the owner token the action compared.
	Token string
}

// Record writes an audit row for an action on another tier's record (the
// Redis tier's release, which this table records as well), in its own
// statement.
func (a *Admin) Record(ctx context.Context, e AuditEntry) error {
	if err := a.l.check(ctx, e.Key); err != nil {
		return err
	}
	if err := e.valid(); err != nil {
		return err
	}
	return a.l.wrapOn("audit", []string{a.audit}, a.l.retry(ctx, func() error { return a.note(ctx, a.l.pool(), e) }))
}

// note inserts the audit row of e.
func (a *Admin) note(ctx context.Context, q querier, e AuditEntry) error {
	scope, client := e.Scope, e.ClientKey
	if scope == "" && client == "" {
		scope, client = e.Key.Scope(), e.Key.ClientKey()
	}
	d := e.Key.Digest()
	_, err := q.exec(ctx, a.st.note, label(e.By), e.Action, e.Tier.String(), string(e.Outcome), d[:],
		label(scope), label(client), bin(e.Token), label(e.Reason))
	return err
}

// Trail returns the audit rows of key, newest first, at most limit.
func (a *Admin) Trail(ctx context.Context, key idem.Key, limit int) ([]AuditEntry, error) {
	if err := a.l.check(ctx, key); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("sqllayer: Trail needs a positive limit (got %d)", limit)
	}
	d := key.Digest()
	var out []AuditEntry
	err := a.l.retry(ctx, func() error {
		out = out[:0]
		rows, err := a.l.pool().query(ctx, a.st.trail, d[:], limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				e             AuditEntry
				at            = dbTime{wall: !a.l.native}
				tier, outcome string
				digest, token []byte
			)
			if err := rows.Scan(&at, &e.By, &e.Action, &tier, &outcome, &digest, &e.Scope, &e.ClientKey, &token, &e.Reason); err != nil {
				return err
			}
			e.At, e.Outcome, e.Key, e.Token = at.t, Outcome(outcome), key, string(token)
			if err := e.Tier.UnmarshalText([]byte(tier)); err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, a.l.wrapOn("audit trail", []string{a.audit}, err)
}
