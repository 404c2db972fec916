package sqllayer

import "context"

// MUST AGREE with Reserve's and Complete's own statements (reserve.go,
// owner.go): on Postgres a batch of claims and completions answers each as
// the call alone would. FuzzBatchAgreesWithSingle (batch_fuzz_test.go)
// sends it mixed batches under make test.

// On Postgres the claims and completions that queue together go out in
// one statement (pgClaimAndComplete): one transaction, so that they share
// one commit and one WAL flush. Two statements in flight at once, one of
// each kind, each wait for a flush of their own, one after the other.

// writeOp is one Reserve or one Complete in a batch of writes.
type writeOp struct {
	claim *claim      // a Reserve, or nil
	comp  *completion // a Complete, or nil
}

// writeOut is a batch's answer to one writeOp: to its claim or to its
// completion.
type writeOut struct {
	claim claimOut
	comp  completeOut
}

// weight is what a write weighs against maxBatchBytes: its result.
func (op *writeOp) weight() int {
	if op.comp != nil {
		return len(op.comp.result)
	}
	return 0
}

// writeMany answers a batch of claims and completions: each kind as
// reserveMany and completeMany answer it, with the claims' INSERT and the
// completions' UPDATE in one statement when the batch holds both.
func (l *Layer) writeMany(ctx context.Context, ops []*writeOp) []writeOut {
	out := make([]writeOut, len(ops))
	if len(ops) == 1 {
		out[0].claim.again, out[0].comp.again = true, true
		return out
	}
	var (
		cs     []*claim
		ps     []*completion
		ci, pi []int // the ops of cs and ps
	)
	for i, op := range ops {
		if op.claim != nil {
			cs, ci = append(cs, op.claim), append(ci, i)
		} else {
			ps, pi = append(ps, op.comp), append(pi, i)
		}
	}
	cb, pb := &claimBatch{}, &completionBatch{}
	if len(cs) > 0 {
		cb = l.startClaims(ctx, cs)
	}
	if len(ps) > 0 {
		pb = startCompletions(ps)
	}
	switch {
	case len(cb.todo) > 0 && len(pb.todo) > 0:
		claimed, done, err := l.claimAndComplete(ctx, cb, pb)
		l.finishClaims(ctx, cb, claimed, nil, err)
		l.finishCompletions(ctx, pb, done, err)
	case len(cb.todo) > 0:
		claimed, rows, err := l.insertKeys(ctx, cb.cs, cb.todo, cb.tokens)
		l.finishClaims(ctx, cb, claimed, rows, err)
	case len(pb.todo) > 0:
		done, err := l.completeKeys(ctx, pb)
		l.finishCompletions(ctx, pb, done, err)
	}
	cb.answerRepeats(l)
	for j, i := range ci {
		out[i].claim = cb.out[j]
	}
	for j, i := range pi {
		out[i].comp = pb.out[j]
	}
	return out
}

// claimAndComplete runs the claims' INSERT and the completions' UPDATE of
// a batch in one statement, and returns the keys each claimed or
// completed.
func (l *Layer) claimAndComplete(ctx context.Context, cb *claimBatch, pb *completionBatch) (map[string]claimTimes, map[string]bool, error) {
	args := append(l.claimArgs(cb.cs, cb.todo, cb.tokens), l.completionArgs(pb.cs, pb.todo)...)
	claimed := make(map[string]claimTimes, len(cb.todo))
	done := make(map[string]bool, len(pb.todo))
	err := l.retry(ctx, func() error {
		clear(claimed)
		clear(done)
		return queryEach(ctx, l.pool(), l.bst.claimAndComplete.get(0), args, func(scan func(...any) error) error {
			var (
				isClaim bool
				key     []byte
				r       = l.newRow()
			)
			if err := scan(&isClaim, &key, &r.leaseUntil, &r.expiresAt); err != nil {
				return err
			}
			if isClaim {
				claimed[string(key)] = claimTimes{r.leaseUntil.t, r.expiresAt.t}
			} else {
				done[string(key)] = true
			}
			return nil
		})
	})
	return claimed, done, err
}

// orphanWrite releases a claim a batch won for a caller that had left.
func (l *Layer) orphanWrite(op *writeOp, out writeOut) {
	if op.claim != nil {
		l.releaseOrphan(op.claim, out.claim)
	}
}
