// Package idem holds the shared vocabulary of idem, a library that makes
// retried work happen once: a payment, an order, an import row or a queue
// message that arrives twice is executed once, and every copy gets the same
// answer.
//
// The root package does no I/O and links nothing outside the standard
// library. It defines:
//
//   - [Key]: the storage key, a fixed-size digest of a scope (tenant, account,
//     user) and a client key (an Idempotency-Key header, a message ID, or a
//     fingerprint). Two scopes with the same client key never meet.
//   - [Record] and [State]: what a tier stores for a key.
//   - [Layer]: the interface each storage tier implements (Redis, SQL, memory).
//   - The sentinel errors ([ErrInFlight], [ErrMismatch], [ErrLeaseLost],
//     [ErrNotFound], [ErrUnavailable], [ErrConfig], [ErrTooLarge],
//     [ErrClosed]), checked with errors.Is.
//   - [Observer] and [Event]: a hook for metrics and logs.
//   - [Reservation], read with [ReservationFrom] and [KeyFrom]: the claim
//     the execution running in a context holds on its key, for completing
//     it in the function's own transaction or deriving a downstream
//     idempotency key.
//
// Users call the tiered.Store (package tiered) or the HTTP middleware
// (package middleware); the layers live in packages redislayer, sqllayer and
// memlayer and never import each other.
package idem
