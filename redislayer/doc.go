// Package redislayer is the Redis tier of idem: fast duplicate suppression
// across instances with go-redis v9. It implements idem.Layer, idem.Waiter
// (completion signal over pub/sub) and idem.Filler (back-fill from SQL), over
// a plain client, Sentinel (redis.NewFailoverClient), Cluster or Ring through
// the narrow [Client] interface.
//
// # Storage shape
//
// One idempotency key is one Redis string, and one pub/sub channel, both
// carrying the key digest as a hash tag, so that they live in one Cluster
// slot (and one Ring shard):
//
//	prefix{<key hex>}        the record (TTL: retention, or the lease and its grace if longer)
//	prefix{<key hex>}:done   channel of completions, releases and fills
//
// The prefix is "idem:" unless WithPrefix says otherwise. The value is a
// fixed 74-byte header (state, waited flag, owner token, lease mark — the
// retention once completed —, lease end, expiry, fingerprint length;
// numbers in zero-padded decimal) followed by the fingerprint and, once
// completed, the result (see value.go). The state is '1' in progress, '3'
// in progress within a grace (below), '2' completed. One value,
// rather than a hash, lets Reserve claim or read with a single plain SET;
// a fixed header, rather than idem.MarshalRecord's varint layout, lets the
// scripts read the state and token with string.sub and GETRANGE without
// touching the result. The owner token stays in a completed record so that
// a re-sent Complete is recognised; it is never returned to readers.
//
// Every key has a TTL, and Redis's TTL is the only clock that decides: a
// claim stores the record for T = max(ttl, lease + lease/4) with a lease
// mark of T - lease, and its lease has lapsed once the key's PTTL has run
// down to the mark, with at least the grace left. The first Reserve with the same fingerprint that finds the
// lease lapsed grants the owner a grace of a quarter of the lease it
// passes: it moves the mark by the grace (raising the TTL if needed) and
// sets the state to '3', keeping the token; a Reserve that finds the grace
// lapsed too takes the key over. Renew moves the mark (raising the TTL to
// the new lease and its grace if needed, however long the work has
// outlived the retention) and sets the state back to '1', so the next lapse gets a grace
// again; Complete re-arms the TTL to ttl. So leases, graces and retention
// follow Redis's expiry, and miniredis's FastForward moves them all. The lease end and expiry in the
// header are for readers (idem.Record.LeaseUntil and ExpiresAt), taken from
// the writer's clock. Durations are rounded up to whole milliseconds,
// never down to 0: PEXPIRE 0 deletes a key at once (the trap of a
// sub-millisecond TTL given to redislock).
//
// # Commands, scripts, and why not redislock
//
// Reserve is one plain command in the common cases, and no script, sent in
// a pipeline after a PTTL of the key (one round trip). While most keys it
// sees arrive new, it sends SET key claim NX PX T GET, which stores the
// claim (an in-progress record with a token minted in Go by idem.NewToken,
// never derived from the key) if nothing is there, and returns what is
// there otherwise, writing nothing: a completed record is a replay, an
// in-progress record with another fingerprint is answered as it is (never
// taken over). Only an in-progress record with the same fingerprint needs
// reserve.lua, a second round trip that decides atomically whether its
// lease has lapsed, and then grants its grace or, once the grace lapsed
// too, takes it over. reserve.lua alone does the whole claim-or-read on
// Redis before 7.0, which refuses NX with GET. A plain command, not a
// script, serves the hot path because a script costs Redis several times a
// GET of the same value (measured here: about 2 µs of server time for an
// empty script, 6 µs for one that returns a 1 KiB value, against 0.5 µs for
// a GET of it), which would cost duplicates a fifth or more of their
// throughput. While most keys arrive taken (a burst of retries, a
// redelivered queue), Reserve sends a plain GET first: a duplicate then
// costs Redis's cheapest read, and a new key costs that GET and the claim.
// The layer judges the mix over its last few dozen calls; WithReserveOrder
// fixes the order instead.
//
// # ExpiresIn
//
// Every record the layer returns carries ExpiresIn, how long it had at
// least left by Redis's clock, so that a cache of it (the tiered Store's)
// never outlives it whatever the application's clock says. Get, Wait and
// reserve.lua read the record and its PTTL in one script. Reserve's
// pipeline reads the PTTL just before the GET or SET NX GET, not
// atomically, so it takes the smaller of the PTTL and the record's mark:
// a completed record's mark is its retention and an in-progress record's
// lease mark is at most its TTL when written, so a record written between
// the two commands still lives at least that long, and one that was there
// for the PTTL lives at least the PTTL (a completed record's TTL never
// changes). For a completed record that is its exact PTTL; an in-progress
// record shown to another fingerprint (a mismatch) may get a smaller
// figure: its lease mark, at least the grace while its lease runs and
// down to 0 within the grace. Redis counts whole milliseconds, so one is taken off every
// figure. A completed record written by a version of the layer that did
// not store its retention gets 0 from Reserve (the layer cannot tell) and
// its PTTL from Get.
//
// The other operations are Lua scripts (files *.lua, embedded), run with
// Script.Run: EVALSHA, and EVAL when the server lacks it.
//
//   - complete.lua, release.lua and renew.lua are compare-and-set on the
//     token; complete.lua and release.lua publish on the key's channel when
//     a Wait has flagged the record (nearly never, so nearly no completion
//     pays for a PUBLISH).
//   - fill.lua stores a completed record decided by SQL over an in-progress
//     one, leaves a completed one alone, and publishes.
//   - get.lua reads the record and its PTTL, from which a waiter learns
//     when the lease lapses; a waiter's read also flags an in-progress
//     record as waited (a one-byte SETRANGE, once per claim).
//
// go-redis re-sends a command after some network errors, so each one is
// safe to run twice with the same arguments: a re-sent claim finds its own
// token and stays claimed, a re-sent grace finds the grace running and
// answers in progress, a re-sent Complete finds the record completed by
// its token and returns success, a re-sent Release finds nothing to release.
//
// bsm/redislock is not used, although a claim has its shape (a random token
// stored with NX and PX). Its API cannot express what this layer needs:
// Obtain cannot return what holds the key in the same round trip (it
// answers ErrNotObtained, and a duplicate would need a second call to read
// the record); a Lock can be refreshed or released only through the *Lock
// that Obtain returned in the same process, while idem's Renew, Complete and
// Release arrive with a bare token, possibly on another instance; and its
// scripts compare the whole value, where the record keeps fingerprint and
// result beside the token. Its obtain script also lets the same token
// re-obtain a held lock: this layer borrows that rule for re-sent claims,
// which is safe only because every claim mints a random token.
//
// # Wait
//
// Wait subscribes to the key's channel on the layer's shared pub/sub
// connection (one per Layer, or one per shard over a Ring; channels are
// subscribed while someone waits on them and unsubscribed after), reads the
// record once Redis has confirmed the subscription, and then blocks until a
// message or the end of its context. It re-reads the record on each message,
// and once when the owner's lease is due to lapse; it never polls. The
// connection's goroutine belongs to the Layer and ends with Close. If the
// connection drops, waiters re-read the record at once and again after
// go-redis has subscribed anew. Channels use PUBLISH and SUBSCRIBE, which
// every Redis version, miniredis and Cluster (through its bus) support;
// sharded pub/sub (SPUBLISH, Redis 7) would spare the Cluster bus but needs a
// connection per node and is not supported by miniredis.
//
// # Timeouts and errors
//
// A call's timeout belongs to whoever makes the call. Reserve, Get,
// Complete, Renew, Release, Fill and Check are one round trip each, made
// for a caller, and bounded by the caller's context: a tiered.Store bounds
// each call it makes to the tier (tiered.WithTimeouts, 250 ms by default);
// a caller of the layer itself passes a context with a deadline. A Wait
// lasts as long as its caller waits; the round trips inside it (the
// subscription, the reads) are the layer's own, each bounded by WithTimeout
// (default 250 ms). The client's own timeouts (ReadTimeout, WriteTimeout)
// bound every round trip as well. A dead, paused or unreachable Redis gives
// idem.ErrUnavailable, wrapping the driver's error, within that time,
// provided the client honours context deadlines (ContextTimeoutEnabled:
// true in its options). The caller's own
// cancellation or deadline is returned as the caller's context.Canceled or
// context.DeadlineExceeded. The zero key gives idem.ErrInvalidKey; a result
// over idem.MaxResult (4 MiB) gives idem.ErrTooLarge. A reply that no retry changes, a mistake in setting the
// client up, gives idem.ErrConfig with advice instead of
// idem.ErrUnavailable: credentials refused (NOAUTH, WRONGPASS), an ACL that
// forbids a command, key or channel the layer uses (NOPERM), a DB number the
// server lacks, a command the server does not offer. Check, a PING and the
// read script in one round trip, answers nil, idem.ErrConfig or
// idem.ErrUnavailable for readiness probes.
//
// # Cluster notes
//
// Each command, pipeline and script touches the one key of one idempotency
// key, so it runs on the node that owns the key's slot, and the channel name
// shares the hash tag. The scripts read no clock and are deterministic. SET with NX and
// GET needs Redis 7.0; older servers get reserve.lua instead. Completion
// messages cross the cluster bus to the node the layer's subscription sits
// on.
//
// # Sentinel notes
//
// A failover client (redis.NewFailoverClient) follows the master when
// Sentinel moves it, and the layer keeps working on the same client: calls
// caught by the switch fail with idem.ErrUnavailable. Two things are
// Sentinel's and Redis's, not the layer's. Writes
// that reached the old master after the replica was promoted, and before
// the client heard of the switch, are lost with it (after a forced
// failover the old master accepts them for a moment). And the layer's pub/sub
// connection stays on the old master until Sentinel turns it into a replica
// (some seconds), so a Wait in that window hears no completion and ends only
// at the owner's lease; the tiered Store asks SQL again at least every
// second, so with SQL configured it costs a waiter at most that second.
//
// # What Redis cannot promise
//
// Redis may lose a lease: eviction (volatile-lru, a common managed default,
// evicts keys that have a TTL, which is every key here), a failover to a
// replica that had not yet received the claim, or a flush. A duplicate may
// then claim a key whose owner is still working. That is why SQL decides
// when money is at stake: this layer makes duplicates cheap and fast, the
// SQL layer makes the final yes or no.
//
// # Operators
//
// Layer.Admin reads a record with its owner token (Redis keeps no scope,
// client key or claim time: SQL has them), lists the claims whose lease
// lapsed by a SCAN of every master or shard, and frees a claim or a
// completed record by compare-and-set on the token read (admin.lua). The
// idem command uses it beside the SQL tier's Admin, which keeps the audit.
package redislayer
