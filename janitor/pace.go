package janitor

import (
	"context"
	"fmt"
	"time"
)

// BatchSweeper is a Sweeper that also deletes one batch at a time, so that
// a Janitor can pace its sweep: DeleteExpiredBatch deletes at most batch
// rows of each kind it sweeps and says how many it deleted; fewer than
// batch means none is left. *sqllayer.Layer is one. A Sweeper that is not
// a BatchSweeper is swept with DeleteExpired alone, unpaced.
type BatchSweeper interface {
	Sweeper
	DeleteExpiredBatch(ctx context.Context, batch int) (int64, error)
}

// Defaults of a Janitor's pace (see WithStatementTime, WithDutyCycle,
// WithRate).
const (
	// DefaultStatementTime is how long one DELETE statement of a paced
	// sweep aims to run.
	DefaultStatementTime = 10 * time.Millisecond
	// DefaultDutyCycle is the share of a paced sweep's time that a DELETE
	// statement runs; it pauses the rest.
	DefaultDutyCycle = 0.2
	// minBatch is the smallest batch a paced sweep sends: below it a
	// statement's own cost (its round trip, its commit) is most of it.
	minBatch = 50
	// firstBatch is the batch a paced sweep starts with, before it has
	// measured a statement (at most the configured batch).
	firstBatch = 100
)

// WithStatementTime sets how long one DELETE statement of a paced sweep
// aims to run: after each statement the Janitor measures what a row cost
// and sizes the next batch to take about d, between 50 rows and the batch
// of WithBatch, halving or doubling it at most from one statement to the
// next. A short statement holds the database's processor, its
// disk and its locks briefly, so that the calls the sweep runs beside wait
// little on it. Default DefaultStatementTime; it must be positive. Only a
// BatchSweeper (a *sqllayer.Layer) is paced.
func WithStatementTime(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithStatementTime: give a positive duration (got %v)", d)
		}
		c.stmtTime = d
		return nil
	}
}

// WithDutyCycle sets the share of a paced sweep's time that its DELETE
// statements run: after a statement that took t, the Janitor pauses
// t*(1-share)/share before the next, so that the sweep costs the database
// about share of one connection's time whatever the rows cost. 1 sweeps
// without pausing. Default DefaultDutyCycle; it must be in (0, 1]. Only a
// BatchSweeper (a *sqllayer.Layer) is paced.
func WithDutyCycle(share float64) Option {
	return func(c *config) error {
		if !(share > 0 && share <= 1) {
			return fmt.Errorf("WithDutyCycle: give a share in (0, 1] (got %v)", share)
		}
		c.duty = share
		return nil
	}
}

// WithRate bounds a paced sweep to at most rows deleted per second: it
// pauses after a batch for as long as the rate asks, or as the duty cycle
// asks if that is longer. Default: no bound but the duty cycle; rows must
// be positive. Only a BatchSweeper (a *sqllayer.Layer) is paced.
func WithRate(rows int) Option {
	return func(c *config) error {
		if rows <= 0 {
			return fmt.Errorf("WithRate: give a positive number of rows a second, or leave the option out for no bound (got %d)", rows)
		}
		c.rate = rows
		return nil
	}
}

// sweep deletes expired rows in statements of at most most rows: paced
// when the sweeper is a BatchSweeper, with DeleteExpired otherwise.
func (j *Janitor) sweep(ctx context.Context, most int) (int64, error) {
	bs, ok := j.sweeper.(BatchSweeper)
	if !ok {
		return j.sweeper.DeleteExpired(ctx, most)
	}
	return j.paced(ctx, bs, most)
}

// paced sweeps batch by batch, each batch sized from the cost of a row in
// the statements before it to take about the statement time, and pauses
// after each for the duty cycle and the rate, until a batch deletes fewer
// rows than it could. A pause ends early when ctx ends.
func (j *Janitor) paced(ctx context.Context, s BatchSweeper, most int) (n int64, err error) {
	batch := min(most, firstBatch)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		start := time.Now()
		deleted, err := s.DeleteExpiredBatch(ctx, batch)
		took := time.Since(start)
		n += deleted
		if err != nil || deleted < int64(batch) {
			return n, err
		}
		pause := j.pause(took, deleted)
		batch = j.nextBatch(batch, took, deleted, most)
		if pause <= 0 {
			continue
		}
		if timer == nil {
			timer = time.NewTimer(pause)
		} else {
			timer.Reset(pause)
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-timer.C:
		}
	}
}

// pause returns how long to wait after a batch that deleted rows in took:
// what the duty cycle and the rate ask, whichever is longer.
func (j *Janitor) pause(took time.Duration, rows int64) time.Duration {
	p := time.Duration(float64(took) * (1 - j.duty) / j.duty)
	if j.rate > 0 {
		p = max(p, time.Duration(rows)*time.Second/time.Duration(j.rate)-took)
	}
	return p
}

// nextBatch returns the batch that should take about the statement time at
// the cost per row that the last batch measured, between half and twice
// the last one (one statement's time is a noisy measure), and between
// minBatch and most.
func (j *Janitor) nextBatch(batch int, took time.Duration, rows int64, most int) int {
	if took <= 0 || rows <= 0 {
		return min(2*batch, most)
	}
	ideal := int(min(int64(j.stmtTime)*rows/int64(took), 1<<30))
	return max(min(ideal, 2*batch, most), batch/2, min(minBatch, most))
}
