package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/uptrace/bun"

	"github.com/idemkit/idem"
)

// crashHeader asks POST /charges/tx to drop its connection right after the
// commit, as a process killed between the commit and its response would
// (scenario 8). The fingerprint leaves headers out: the retry without it is
// the same request.
const crashHeader = "X-Demo-Crash"

// connKey is the context key of the request's connection.
type connKey struct{}

// withConn is the server's ConnContext: a handler can reach its connection.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// chargeInTx is the handler of POST /charges/tx: the charge and idem's
// completion commit in one transaction, so that whatever happens to the
// response after the commit, a retry replays it and never charges again.
func (in *instance) chargeInTx(w http.ResponseWriter, r *http.Request) {
	var req chargeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 || req.Currency == "" || req.Customer == "" {
		http.Error(w, `{"error":"amount, currency and customer are required"}`, http.StatusBadRequest)
		return
	}
	res, ok := idem.ReservationFrom(r.Context())
	if !ok {
		http.Error(w, `{"error":"an Idempotency-Key is required"}`, http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256([]byte(res.Key().Hex()))
	err := in.db.RunInTx(r.Context(), nil, func(ctx context.Context, tx bun.Tx) error {
		c := &Charge{
			Provider:          "demo-psp",
			ExternalPaymentID: "pay_" + hex.EncodeToString(sum[:12]),
			Customer:          req.Customer,
			Amount:            req.Amount,
			Currency:          req.Currency,
			CreatedAt:         time.Now().UTC(),
		}
		if _, err := tx.NewInsert().Model(c).Exec(ctx); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/charges/"+strconv.FormatInt(c.ID, 10))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"charge_id": c.ID, "status": "succeeded", "amount": c.Amount, "currency": c.Currency,
			"external_payment_id": c.ExternalPaymentID, "served_by": in.name,
		})
		// Last, just before the commit: the response written is what is
		// stored, and idem's record commits with the charge.
		return in.sql.CompleteReservation(ctx, tx, res, nil)
	})
	if err != nil {
		// Nothing committed: the middleware answers 500 in the response's
		// place and releases the key, so the retry charges once.
		return
	}
	if r.Header.Get(crashHeader) == "after-commit" {
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			_ = c.Close() // committed, but the client never hears of it
		}
	}
}

func (d *demo) inTxCrash(ctx context.Context) (string, error) {
	customer := "cus_tx_" + d.run
	key := "order-8008-" + d.run
	body := chargeBody(2500, customer, "2026-11-30T10:08:00Z", "t8")
	first := postTo(ctx, freshClient, d.url(0)+"/charges/tx", d.merchant(), key, body, crashHeader, "after-commit")
	if first.err == nil {
		return "", fmt.Errorf("the first attempt got %d %q, want its connection cut", first.status, first.body)
	}
	retry := postTo(ctx, httpClient, d.url(1)+"/charges/tx", d.merchant(), key, body)
	again := postTo(ctx, httpClient, d.url(2)+"/charges/tx", d.merchant(), key, body)
	if retry.status != 201 || !retry.replayed || !retry.same(again) {
		return "", fmt.Errorf("retries got %d %q (replay %v) and %d %q, want the committed 201 replayed",
			retry.status, retry.body, retry.replayed, again.status, again.body)
	}
	n, err := d.chargesFor(ctx, customer)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("connection cut after the commit; retries: 201 replayed twice, %d charge", n), expectCharges(n, 1)
}
