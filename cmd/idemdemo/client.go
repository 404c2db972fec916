package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idem/client"
)

// replayMarker is the header the demo's middleware sets on replays.
const replayMarker = "Idempotent-Replayed"

// response is what a client saw.
type response struct {
	status   int
	body     string
	location string
	replayed bool // the response carries the replay marker
	err      error
}

// same reports whether two responses are identical to a client.
func (r response) same(o response) bool {
	return r.err == nil && o.err == nil && r.status == o.status && r.body == o.body && r.location == o.location
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// retrying is the client of a caller that retries as idem's client half
// does: one key per operation, kept across every retry, with what may not
// have been answered retried (a 409 while the first attempt is still
// completing, honouring its Retry-After) and nothing else (a 422).
var retrying = func() *http.Client {
	c, err := client.NewClient(nil, client.WithDeadline(30*time.Second), client.WithRetention(24*time.Hour),
		client.WithReplayMarker(replayMarker))
	if err != nil {
		panic(err) // the options above are valid
	}
	return c
}()

// freshClient dials a new connection for every request. net/http re-sends
// a request that carries an Idempotency-Key when a reused connection
// breaks before an answer; a request whose cut the demo shows must not be
// re-sent behind its back.
var freshClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// post sends one charge request.
func post(ctx context.Context, url, merchant, key, body string) response {
	return postTo(ctx, httpClient, url+"/charges", merchant, key, body)
}

// postTo sends one charge request to url through client, with extra
// headers as name, value pairs.
func postTo(ctx context.Context, client *http.Client, url, merchant, key, body string, extra ...string) response {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return response{err: err}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Merchant", merchant)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(b), location: resp.Header.Get("Location"),
		replayed: resp.Header.Get(replayMarker) == "true", err: err}
}

// postAndVanish sends a charge request over a raw connection and hangs up
// as soon as the first byte of the answer arrives: the server did the work,
// the client never learns the outcome.
func postAndVanish(url, merchant, key, body string) error {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req := fmt.Sprintf("POST /charges HTTP/1.1\r\nHost: demo\r\nContent-Type: application/json\r\n"+
		"X-Merchant: %s\r\nIdempotency-Key: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		merchant, key, len(body), body)
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	one := make([]byte, 1)
	_, err = io.ReadFull(c, one)
	return err
}

func chargeBody(amount int64, customer, ts, trace string) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"EUR","customer":%q,"timestamp":%q,"trace_id":%q}`, amount, customer, ts, trace)
}
