// Package faultproxy is an in-process TCP proxy for fault tests. Put it
// between a client and Redis or Postgres, then add latency, black-hole the
// traffic, reset every connection, refuse new ones, or let a request through
// and reset the connection when the reply comes back (the write applied, the
// answer lost). Every goroutine it starts ends with Close.
package faultproxy
