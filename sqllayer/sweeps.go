package sqllayer

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/idemkit/idem"
)

// The janitor's runs, kept in the audit table (Admin's) so that an
// operator can tell when expired rows were last swept, and by whom.

// sweepKey is the key the janitor's audit rows carry: a client key no
// client can send (it is not printable), so no record's trail shows them.
var sweepKey = idem.NewKey("", "\x00janitor")

// Outcomes of the janitor's runs (audit rows whose Action is "sweep").
const (
	// Swept: the janitor deleted what had expired.
	Swept Outcome = "swept"
	// SweepFailed: the janitor's sweep failed; Reason says why.
	SweepFailed Outcome = "failed"
)

// RecordSweep writes one run of the janitor to the audit table
// (WithAuditTable): when it ran, on which host, how many rows it deleted
// and in how long, or why it failed; Admin.Stats reads the last one back
// (idem stats shows it). janitor.Janitor calls it after each sweep it ran
// (it is a janitor.SweepRecorder). Where the audit table was never created
// (Admin().Init), it records nothing and returns nil: the runs are kept
// only where operators asked for the table.
func (l *Layer) RecordSweep(ctx context.Context, deleted int64, took time.Duration, sweepErr error) error {
	host, _ := os.Hostname()
	e := AuditEntry{
		Note:    Note{By: "janitor on " + host, Reason: fmt.Sprintf("deleted %d rows in %v", deleted, took.Round(time.Millisecond))},
		Action:  "sweep",
		Tier:    idem.TierSQL,
		Outcome: Swept,
		Key:     sweepKey,
	}
	if host == "" {
		e.By = "janitor"
	}
	if sweepErr != nil {
		e.Outcome, e.Reason = SweepFailed, fmt.Sprintf("after %d rows in %v: %v", deleted, took.Round(time.Millisecond), sweepErr)
	}
	a := l.Admin()
	err := l.retry(ctx, func() error { return a.note(ctx, l.pool(), e) })
	if k, m := diagnose(err, l.dialect); err != nil && k == kindConfig && m == missingTable {
		return nil
	}
	return a.l.wrapOn("record sweep", []string{a.audit}, err)
}

// lastSweep returns the newest of the janitor's runs in the audit table;
// a zero At when there is none, or no audit table.
func (a *Admin) lastSweep(ctx context.Context) (AuditEntry, error) {
	entries, err := a.Trail(ctx, sweepKey, 1)
	if k, m := diagnose(err, a.l.dialect); err != nil && k == kindConfig && m == missingTable {
		return AuditEntry{}, nil
	}
	if err != nil || len(entries) == 0 {
		return AuditEntry{}, err
	}
	return entries[0], nil
}
