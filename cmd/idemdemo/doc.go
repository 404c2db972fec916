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
//  9. Orders on NATS JetStream (a nats-server embedded in the process, a
//     stream that drops a retried publish with the same Nats-Msg-Id), three
//     consumers in one durable queue group, each a Watermill router with
//     idemwatermill over its instance's Store. The handler writes a
//     shipment row and completes idem's key in the same transaction
//     (idemwatermill.Complete). The publisher retries every third publish
//     with the same message, which JetStream drops, and re-sends every
//     fifth order under a new message ID, which JetStream stores and idem
//     recognizes by the order ID in its metadata. The consumer that ships
//     order 5 dies after its commit and before its ack; the broker
//     redelivers the message after its AckWait (2 s) to another consumer,
//     which acknowledges it without shipping again. The ledger must hold
//     one shipment per order, and the broker no unacknowledged message.
//  10. Payments on Kafka (kfake, franz-go's in-process Kafka: three
//     brokers and a group coordinator), three franz-go members of one
//     consumer group with auto-commit off. Each record's ledger row and
//     processed event commit together (sqllayer's InTx, the event ID from
//     the record's event_id header); offsets are committed after. The
//     publisher sends every fifth event twice under the same event_id. The
//     member that gets event 5 dies after its transaction and before its
//     offset commit; the rebalance hands its records to the others, which
//     find them processed. The ledger must hold one row per event, and the
//     group's offsets the end of every partition.
//
// The charges table also carries UNIQUE (provider, external_payment_id): the
// payment provider's ID is derived from the idempotency key passed
// downstream, so even a charge that slipped past every tier could not be
// written twice. The command exits non-zero if any expectation fails.
package main
