package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"math/big"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/pgxsqlc/db"
	"github.com/idemkit/idem/idempgx"
	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// accountKey is the context key under which authenticate puts the
// caller's account.
type accountKey struct{}

// authenticate stands for the team's authentication: it puts the caller's
// account in the request's context, where idem's scope reads it.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account := r.Header.Get("X-Account") // the team's token check goes here
		if account == "" {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, account)))
	})
}

// service is the payments service: the team's pool and queries, and
// idem's SQL tier on the same pool.
type service struct {
	pool    *pgxpool.Pool
	queries *db.Queries
	sql     *idempgx.Layer
}

// newRouter serves POST /payments behind idem's middleware on store: a
// retry of a key replays the answer that committed. An atomic Store
// (tiered.WithAtomic) gets the handler that writes in the Store's
// transaction.
func (s *service) newRouter(store *tiered.Store, atomic bool) (http.Handler, error) {
	guard, err := middleware.New(store, middleware.WithScope(middleware.ScopeFromContext(accountKey{})))
	if err != nil {
		return nil, err
	}
	create := s.createPayment
	if atomic {
		create = s.createPaymentAtomic
	}
	r := chi.NewRouter()
	r.Use(authenticate)
	r.With(guard).Post("/payments", create)
	return r, nil
}

// paymentRequest is POST /payments' body.
type paymentRequest struct {
	OrderID           string `json:"order_id"`
	CustomerID        string `json:"customer_id"`
	Provider          string `json:"provider"`
	ExternalPaymentID string `json:"external_payment_id"`
	Amount            string `json:"amount"`
}

// createPayment inserts the payment and completes idem's reservation in
// one pgx.Tx: the payment and the answer every retry of the key replays
// commit together, or not at all.
func (s *service) createPayment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var in paymentRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, "malformed payment", http.StatusBadRequest) // a 4xx is kept, as any answer is
		return
	}
	res, _ := idem.ReservationFrom(ctx) // always there behind the middleware
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		http.Error(w, "unavailable", http.StatusServiceUnavailable) // a 5xx is not kept: the retry runs
		return
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	status, body, err := s.insertOrExisting(ctx, s.queries.WithTx(tx), s.sql.Tx(tx), in)
	if err != nil {
		log.Printf("payment: %v", err)
		http.Error(w, "payment failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
	// Last, in the same transaction: stores the response written.
	if err := s.sql.CompleteReservation(ctx, s.sql.Tx(tx), res, nil); err != nil {
		log.Printf("payment: completing the key: %v", err) // nothing commits: the client gets a 500, its retry runs
		return
	}
	if err := tx.Commit(ctx); err != nil {
		log.Printf("payment: commit: %v", err) // the Store reads what committed and answers accordingly
	}
}

// createPaymentAtomic is createPayment for an atomic Store: the Store
// began the transaction with the key's claim in it, and commits the
// payment, the claim and the response in one COMMIT once the handler
// returns.
func (s *service) createPaymentAtomic(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var in paymentRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, "malformed payment", http.StatusBadRequest)
		return
	}
	tx, _ := idempgx.TxFrom(ctx) // a pgx.Tx, always there behind the middleware of an atomic Store
	status, body, err := s.insertOrExisting(ctx, s.queries.WithTx(tx), s.sql.Tx(tx), in)
	if err != nil {
		log.Printf("payment: %v", err)
		http.Error(w, "payment failed", http.StatusInternalServerError) // a 5xx rolls everything back
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // stored with the claim, in the same COMMIT
}

// conflict is the answer to a payment whose provider id names another
// payment than the one asked for.
type conflict struct {
	Error   string     `json:"error"`
	Payment db.Payment `json:"payment"`
}

// insertOrExisting is the second protection for money: the payment's own
// UNIQUE (provider, external_payment_id). A client that lost its key and
// sends the same payment under a new one hits it; the insert runs under a
// savepoint, so that the transaction stays usable on Postgres (which
// would otherwise refuse every later statement, idem's completion
// included), and the handler answers in the same transaction with the
// payment that exists:
//
//   - 200 and the payment, when it is the one asked for (same order,
//     customer and amount): the charge happened once, and the new key's
//     answer says so; a retry of that key replays the 200.
//   - 409 and the payment, when the provider id names another payment: the
//     request contradicts what happened, and no retry makes it succeed.
//
// A first insert answers 201 and the new payment.
func (s *service) insertOrExisting(ctx context.Context, q *db.Queries, tx sqllayer.Tx, in paymentRequest) (status int, body any, err error) {
	var p db.Payment
	err = sqllayer.Savepoint(ctx, tx, func(ctx context.Context) error {
		p, err = q.InsertPayment(ctx, db.InsertPaymentParams(in))
		return err
	})
	switch {
	case err == nil:
		return http.StatusCreated, p, nil
	case !sqllayer.IsUnique(err):
		return 0, nil, err
	}
	existing, err := q.GetPaymentByExternalID(ctx, db.GetPaymentByExternalIDParams{Provider: in.Provider, ExternalPaymentID: in.ExternalPaymentID})
	if err != nil {
		return 0, nil, err
	}
	if existing.OrderID != in.OrderID || existing.CustomerID != in.CustomerID || !sameAmount(existing.Amount, in.Amount) {
		return http.StatusConflict, conflict{Error: "the provider's payment id names another payment", Payment: existing}, nil
	}
	return http.StatusOK, existing, nil
}

// sameAmount compares the stored amount (numeric(19,4) as text: "12.5000")
// with the one asked for ("12.50").
func sameAmount(stored, asked string) bool {
	a, okA := new(big.Rat).SetString(stored)
	b, okB := new(big.Rat).SetString(asked)
	return okA && okB && a.Cmp(b) == 0
}

// settled is the provider's event that a payment settled.
type settled struct {
	EventID           string `json:"event_id"`
	Provider          string `json:"provider"`
	ExternalPaymentID string `json:"external_payment_id"`
}

// errUnknownPayment is a settlement of no payment of ours.
var errUnknownPayment = errors.New("settlement of an unknown payment")

// handleSettled is the settlement consumer: it marks the event processed
// and makes its business update (the payment settled, its ledger entry
// booked) in one pgx.Tx. A redelivery — the broker's, after a crash
// between the commit and the ack — finds the event processed and changes
// nothing; a failure rolls the mark back with the update, and the
// redelivery runs it again.
func (s *service) handleSettled(ctx context.Context, ev settled) (duplicate bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if dup, err := s.sql.MarkProcessed(ctx, s.sql.Tx(tx), "settlements", ev.EventID); err != nil || dup {
		return dup, err
	}
	q := s.queries.WithTx(tx)
	p, err := q.SettlePayment(ctx, db.SettlePaymentParams{Provider: ev.Provider, ExternalPaymentID: ev.ExternalPaymentID})
	if err != nil {
		return false, errors.Join(errUnknownPayment, err)
	}
	if err := q.InsertLedgerEntry(ctx, db.InsertLedgerEntryParams{PaymentID: p.ID, Amount: p.Amount}); err != nil {
		return false, err
	}
	return false, tx.Commit(ctx)
}
