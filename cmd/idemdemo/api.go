package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"github.com/idemkit/idem/middleware"
	"github.com/idemkit/idem/redislayer"
	"github.com/idemkit/idem/sqllayer"
	"github.com/idemkit/idem/tiered"
)

// Charge is one row of the charges table. The unique (provider,
// external_payment_id) is the second, independent guard for money: the
// provider's payment ID is derived from the idempotency key, so a second
// charge for one key cannot be written even if every idem tier failed.
type Charge struct {
	bun.BaseModel `bun:"table:idemdemo_charges"`

	ID                int64     `bun:",pk,autoincrement" json:"id"`
	Provider          string    `bun:",notnull,unique:provider_payment" json:"provider"`
	ExternalPaymentID string    `bun:",notnull,unique:provider_payment" json:"external_payment_id"`
	Customer          string    `bun:",notnull" json:"customer"`
	Amount            int64     `bun:",notnull" json:"amount"`
	Currency          string    `bun:",notnull" json:"currency"`
	CreatedAt         time.Time `bun:",notnull" json:"created_at"`
}

// LedgerEntry is the business write of the queue consumer (scenario 5).
type LedgerEntry struct {
	bun.BaseModel `bun:"table:idemdemo_ledger"`

	ID      int64  `bun:",pk,autoincrement"`
	EventID string `bun:",notnull"`
	Amount  int64  `bun:",notnull"`
}

// Customer is the record a CRM sync keeps current (scenario 7).
type Customer struct {
	bun.BaseModel `bun:"table:idemdemo_customers"`

	ExternalID string `bun:",pk"`
	Name       string `bun:",notnull"`
	Version    int64  `bun:",notnull"`
}

// createSchema creates the demo's own tables and idem's.
func createSchema(ctx context.Context, db *bun.DB) error {
	for _, m := range []any{(*Charge)(nil), (*LedgerEntry)(nil), (*Customer)(nil), (*Shipment)(nil)} {
		if _, err := db.NewCreateTable().Model(m).IfNotExists().Exec(ctx); err != nil {
			return fmt.Errorf("create demo table: %w", err)
		}
	}
	l, err := sqllayer.New(db)
	if err != nil {
		return err
	}
	return l.Init(ctx)
}

// chargeRequest is the body of POST /charges. Timestamp and TraceID change
// on every attempt; idem's default fingerprint leaves them out.
type chargeRequest struct {
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Customer  string `json:"customer"`
	Timestamp string `json:"timestamp,omitempty"`
	TraceID   string `json:"trace_id,omitempty"`
}

// instance is one replica of the payments service.
type instance struct {
	name  string
	db    *bun.DB
	sql   *sqllayer.Layer
	rdb   *redis.Client
	redis *redislayer.Layer
	store *tiered.Store
	srv   *http.Server
	ln    net.Listener
	done  chan struct{}
}

// startInstance starts one replica on a loopback port.
func startInstance(name string, b *backends, providerDelay time.Duration) (*instance, error) {
	db, err := b.openDB()
	if err != nil {
		return nil, err
	}
	in := &instance{name: name, db: db, done: make(chan struct{})}
	if in.sql, err = sqllayer.New(db); err != nil {
		in.close()
		return nil, err
	}
	in.rdb = redis.NewClient(&redis.Options{Addr: b.redisAddr(), MaxRetries: 1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	if in.redis, err = redislayer.New(in.rdb, redislayer.WithTimeout(250*time.Millisecond)); err != nil {
		in.close()
		return nil, err
	}
	in.store, err = tiered.New(tiered.WithRedis(in.redis), tiered.WithSQL(in.sql),
		tiered.WithRedisFallback(3, time.Second), tiered.WithObserver(b.observer))
	if err != nil {
		in.close()
		return nil, err
	}
	mw, err := middleware.New(in.store, middleware.WithScope(merchant), middleware.WithReplayMarker(replayMarker))
	if err != nil {
		in.close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", in.charge(providerDelay))
	mux.HandleFunc("POST /charges/tx", in.chargeInTx)
	in.srv = &http.Server{
		Handler:           mw(mux),
		ReadHeaderTimeout: 5 * time.Second,
		ConnContext:       withConn,
	}
	in.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		in.close()
		return nil, err
	}
	go func() {
		defer close(in.done)
		_ = in.srv.Serve(in.ln)
	}()
	return in, nil
}

// merchant is the scope of a request: the merchant account it acts for.
func merchant(r *http.Request) string { return r.Header.Get("X-Merchant") }

func (in *instance) url() string { return "http://" + in.ln.Addr().String() }

func (in *instance) close() {
	if in.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = in.srv.Shutdown(ctx)
		cancel()
		<-in.done
	}
	if in.store != nil {
		_ = in.store.Close()
	}
	if in.redis != nil {
		_ = in.redis.Close()
	}
	if in.rdb != nil {
		_ = in.rdb.Close()
	}
	_ = in.db.Close()
}

// charge is the handler of POST /charges: call the payment provider (it
// takes providerDelay), record the charge, answer 201 with its location.
func (in *instance) charge(providerDelay time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req chargeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Amount <= 0 || req.Currency == "" || req.Customer == "" {
			http.Error(w, `{"error":"amount, currency and customer are required"}`, http.StatusBadRequest)
			return
		}
		// The provider gets an idempotency key derived from ours, and its
		// payment ID follows from it.
		// Without a key the provider sees a new payment every time.
		key := merchant(r) + "/" + r.Header.Get("Idempotency-Key")
		if r.Header.Get("Idempotency-Key") == "" {
			key = randomRun() + randomRun()
		}
		sum := sha256.Sum256([]byte(key))
		select {
		case <-time.After(providerDelay):
		case <-r.Context().Done():
			http.Error(w, `{"error":"cancelled"}`, http.StatusServiceUnavailable)
			return
		}
		c := &Charge{
			Provider:          "demo-psp",
			ExternalPaymentID: "pay_" + hex.EncodeToString(sum[:12]),
			Customer:          req.Customer,
			Amount:            req.Amount,
			Currency:          req.Currency,
			CreatedAt:         time.Now().UTC(),
		}
		if _, err := in.db.NewInsert().Model(c).Exec(r.Context()); err != nil {
			status := http.StatusInternalServerError
			if isUniqueViolation(err) {
				status = http.StatusConflict // the database's own guard caught a second charge
			}
			http.Error(w, fmt.Sprintf(`{"error":%q}`, err.Error()), status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/charges/"+strconv.FormatInt(c.ID, 10))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"charge_id": c.ID, "status": "succeeded", "amount": c.Amount, "currency": c.Currency,
			"external_payment_id": c.ExternalPaymentID, "served_by": in.name,
		})
	}
}

// isUniqueViolation reports a unique-constraint error from Postgres or
// SQLite, by the drivers' error codes.
func isUniqueViolation(err error) bool {
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		return coded.SQLState() == "23505"
	}
	var sqliteErr interface{ Code() int }
	if errors.As(err, &sqliteErr) {
		return sqliteErr.Code() == 2067 || sqliteErr.Code() == 1555 // SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY
	}
	return false
}
