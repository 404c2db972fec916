// Command idemdemo shows idem at work on a small payments API.
//
//	go run ./cmd/idemdemo          play the scenarios users fear, print a table
//	go run ./cmd/idemdemo serve    run the API on a port for curl
//
// It needs no servers: by default it embeds miniredis and a SQLite file
// (through bun). To run against real ones, pass -redis and -postgres or set
// IDEM_REDIS_URL and IDEM_POSTGRES_DSN.
//
// The API runs behind the idem middleware on three in-process instances, each
// with its own Store (own Redis client, own database pool) over one Redis and
// one database, as three replicas of a service would. The scenarios:
//
//  1. 20 identical concurrent POSTs spread over the instances: one charge, 20
//     identical responses.
//  2. The response is lost and the client retries: the stored response, no
//     new charge.
//  3. The same key with a different amount: 422, no charge.
//  4. Redis dies in the middle of a burst: still exactly one charge per key.
//  5. A queue redelivers one event 50 times: processed once, in the same
//     transaction as its business write.
//  6. A retry whose timestamp and trace ID differ: recognized as the same
//     request.
//  7. A CRM sync delivers customer crm_4821 version 17 twice and a late
//     version 16: applied once, 16 skipped.
//  8. The charge and idem's completion commit in one transaction
//     (sqllayer's CompleteReservation), and the connection is cut right
//     after the commit, as if the process died before answering: the retry
//     on another instance replays the committed response, one charge.
//
// The charges table also carries UNIQUE (provider, external_payment_id): the
// payment provider's ID is derived from the idempotency key passed
// downstream, so even a charge that slipped past every tier could not be
// written twice. The command exits non-zero if any expectation fails.
package main
