package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	serve := len(args) > 0 && args[0] == "serve"
	if serve {
		args = args[1:]
	}
	fs := flag.NewFlagSet("idemdemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", os.Getenv("IDEM_REDIS_URL"), "Redis URL (default: embedded miniredis; env IDEM_REDIS_URL)")
	pgDSN := fs.String("postgres", os.Getenv("IDEM_POSTGRES_DSN"), "Postgres DSN (default: embedded SQLite; env IDEM_POSTGRES_DSN)")
	addr := fs.String("addr", "127.0.0.1:8080", "serve: the address to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	b, err := openBackends(*redisURL, *pgDSN)
	if err != nil {
		fmt.Fprintf(stderr, "idemdemo: %v\n", err)
		return 1
	}
	defer b.close()
	fmt.Fprintf(stdout, "idem demo\n  redis:    %s\n  database: %s\n\n", b.redisDesc, b.sqlDesc)

	db, err := b.openDB()
	if err != nil {
		fmt.Fprintf(stderr, "idemdemo: %v\n", err)
		return 1
	}
	defer db.Close()
	if err := createSchema(ctx, db); err != nil {
		fmt.Fprintf(stderr, "idemdemo: %v\n", err)
		return 1
	}
	if serve {
		return serveAPI(ctx, b, *addr, stdout, stderr)
	}

	d := &demo{run: randomRun(), b: b, db: db}
	for _, name := range []string{"instance-a", "instance-b", "instance-c"} {
		in, err := startInstance(name, b, 25*time.Millisecond)
		if err != nil {
			fmt.Fprintf(stderr, "idemdemo: start %s: %v\n", name, err)
			return 1
		}
		defer in.close()
		d.instances = append(d.instances, in)
	}
	fmt.Fprintf(stdout, "three instances of a payments API behind the idem middleware: %s, %s, %s\n\n",
		d.instances[0].url(), d.instances[1].url(), d.instances[2].url())

	type row struct{ title, expected, observed, verdict string }
	rows := make([]row, 0, len(scenarios))
	failed := 0
	for i, s := range scenarios {
		progress(stderr, fmt.Sprintf("[%d/%d] %s …", i+1, len(scenarios), s.title))
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		observed, err := s.play(d, sctx)
		cancel()
		verdict := "PASS"
		if err != nil {
			verdict, failed = "FAIL", failed+1
			if observed == "" {
				observed = err.Error()
			} else {
				observed += " (" + err.Error() + ")"
			}
		}
		rows = append(rows, row{s.title, s.expected, observed, verdict})
	}
	progress(stderr, "")

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tscenario\texpected\tobserved\tresult")
	for i, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, r.title, r.expected, r.observed, r.verdict)
	}
	_ = tw.Flush()
	fmt.Fprintln(stdout)
	if failed > 0 {
		fmt.Fprintf(stdout, "%d of %d scenarios failed\n", failed, len(rows))
		return 1
	}
	fmt.Fprintf(stdout, "all %d scenarios passed\n", len(rows))
	return 0
}

// progress shows what runs now: one line rewritten in place on a terminal,
// plain lines elsewhere.
func progress(w io.Writer, line string) {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintf(w, "\r\033[K%s", line)
			return
		}
	}
	if line != "" {
		fmt.Fprintln(w, line)
	}
}

func randomRun() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// serveAPI runs one instance of the API on addr until interrupted.
func serveAPI(ctx context.Context, b *backends, addr string, stdout, stderr io.Writer) int {
	in, err := startInstance("instance-a", b, 0)
	if err != nil {
		fmt.Fprintf(stderr, "idemdemo: %v\n", err)
		return 1
	}
	defer in.close()
	// Serve on the requested address too, with the same handler.
	srv, err := listenOn(addr, in)
	if err != nil {
		fmt.Fprintf(stderr, "idemdemo: listen %s: %v\n", addr, err)
		return 1
	}
	defer srv()
	base := "http://" + addr
	fmt.Fprintf(stdout, "payments API on %s (Ctrl-C to stop). Try:\n\n", base)
	body := `{"amount":4200,"currency":"EUR","customer":"cus_1","timestamp":"2026-11-30T10:00:00Z","trace_id":"t1"}`
	curl := fmt.Sprintf("curl -si -X POST %s/charges -H 'Content-Type: application/json' -H 'X-Merchant: m1' -H 'Idempotency-Key: order-1001'", base)
	fmt.Fprintf(stdout, "  # charge once (201)\n  %s -d '%s'\n\n", curl, body)
	fmt.Fprintf(stdout, "  # the same again, with a new timestamp and trace ID: the stored 201, no new charge\n  %s -d '%s'\n\n", curl,
		strings.NewReplacer("10:00:00", "10:00:09", `"t1"`, `"t2"`).Replace(body))
	fmt.Fprintf(stdout, "  # the same key with another amount: 422\n  %s -d '%s'\n\n", curl, strings.Replace(body, "4200", "9900", 1))
	fmt.Fprintf(stdout, "  # no Idempotency-Key: passes through, charges every time\n  curl -si -X POST %s/charges -H 'Content-Type: application/json' -d '%s'\n\n", base, body)
	txCurl := fmt.Sprintf("curl -si -X POST %s/charges/tx -H 'Content-Type: application/json' -H 'X-Merchant: m1' -H 'Idempotency-Key: order-1002'", base)
	fmt.Fprintf(stdout, "  # the charge and idem's record in one transaction; the connection dropped right after the commit\n  %s -H '%s: after-commit' -d '%s'\n\n", txCurl, crashHeader, body)
	fmt.Fprintf(stdout, "  # the retry: the committed 201 replayed, no new charge\n  %s -d '%s'\n\n", txCurl, body)
	<-ctx.Done()
	return 0
}
