// Package redislayer is the Redis tier of idem: fast duplicate suppression
// across instances with go-redis v9. It implements idem.Layer, idem.Waiter
// (completion signal over pub/sub) and idem.Filler (back-fill from SQL), over
// a plain client, Sentinel (redis.NewFailoverClient), Cluster or Ring through
// the narrow [Client] interface.
//
// # Storage shape
//
// One idempotency key is one key family sharing the hash tag of its digest,
// so that it lives in one Cluster slot (and one Ring shard) and one script
// may touch all of it:
//
//	prefix{<key hex>}        hash: the record (TTL: retention, or the lease if longer)
//	prefix{<key hex>}:lease  string: the owner token (TTL: the lease)
//	prefix{<key hex>}:done   pub/sub channel of completions, releases and fills
//
// The prefix is "idem:" unless WithPrefix says otherwise. The record hash has
// the fields f (fingerprint), s (state: 1 in progress, 2 completed), t (owner
// token), r (result, completed only), l and e (lease end and expiry in Unix
// milliseconds by the server's clock, as reported in idem.Record; l means
// nothing once s is 2). A hash keeps each field addressable, so the scripts
// read the few bytes they decide on and a claim never reads the result back.
// The owner token stays in a completed record so that a re-sent Complete is
// recognised; it is never returned to readers.
//
// Every key has a TTL: the record expires after max(ttl, lease) and is
// re-armed to ttl by Complete; the lease key expires after the lease and is
// renewed by Renew. Expiry is Redis's: a lease is live exactly while its
// lease key exists, so miniredis's FastForward moves it too. Durations are
// rounded up to whole milliseconds, never down to 0: PEXPIRE 0 deletes a key
// at once (the trap of a sub-millisecond TTL given to redislock).
//
// # Scripts, and why not redislock
//
// Each operation is one Lua script (files *.lua, embedded), run with
// Script.Run: EVALSHA, and EVAL when the server lacks it.
//
//   - reserve.lua claims or reads in one round trip: it returns the completed
//     record (replay), the in-progress owner (wait; no token), or stores a
//     new claim (or a takeover of a lapsed lease with the same fingerprint)
//     with the token minted in Go by idem.NewToken. A duplicate writes
//     nothing and is sent no fingerprint when it matches its own.
//   - complete.lua, release.lua and renew.lua are compare-and-set on the
//     token; complete.lua and release.lua publish on the key's channel.
//   - fill.lua stores a completed record decided by SQL over an in-progress
//     one, leaves a completed one alone, and publishes.
//   - get.lua reads the record and the lease's remaining time.
//
// go-redis re-sends a command after some network errors, so each script is
// safe to run twice with the same arguments: a re-sent claim finds its own
// token and stays claimed, a re-sent Complete finds the record completed by
// its token and returns success, a re-sent Release finds nothing to release.
//
// bsm/redislock is not used, although the lease key has its shape (a
// random token under SET NX PX). Its API cannot express what this layer
// needs: Obtain takes one key and cannot read the record and claim in the
// same round trip; a Lock can be refreshed or released only through the
// *Lock value that Obtain returned in the same process, while idem's Renew,
// Complete and Release arrive with a bare token, possibly on another
// instance; and its scripts compare only the lock key, where a completion
// must change the record and the lease together. Its obtain script also lets
// the same token re-obtain a held lock: this layer borrows that rule for
// re-sent claims, which is safe only because every claim mints a random
// token.
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
// Every call is bounded by WithTimeout (default 250 ms) through a context
// deadline; a dead, paused or unreachable Redis gives idem.ErrUnavailable,
// wrapping the driver's error, within that time, provided the client honours
// context deadlines (ContextTimeoutEnabled: true in its options). The
// caller's own cancellation or deadline is returned as the caller's
// context.Canceled or context.DeadlineExceeded. The zero key gives
// idem.ErrInvalidKey; a result over WithMaxResult (default 8 MiB) gives
// idem.ErrTooLarge.
//
// # Cluster notes
//
// All keys of one idempotency key share a slot, so every script runs on one
// node, and the key family moves with its slot when the cluster reshards.
// The scripts call TIME and then write, which Redis allows since 5.0 (script
// effects replication); nothing here needs Redis 7. Completion messages
// cross the cluster bus to the node the layer's subscription sits on.
//
// # What Redis cannot promise
//
// Redis may lose a lease: eviction (volatile-lru, a common managed default,
// evicts keys that have a TTL, which is every key here), a failover to a
// replica that had not yet received the claim, or a flush. A duplicate may
// then claim a key whose owner is still working. That is why SQL decides
// when money is at stake: this layer makes duplicates cheap and fast, the
// SQL layer makes the final yes or no.
package redislayer
