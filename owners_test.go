package idem_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// optionMeanings says what each exported With* option of every library
// package, in every module, means to a user: the one setting it owns. Two
// options with one meaning would be one decision with two owners — two
// places to set it, two defaults that drift, two checks that disagree — so
// no two entries may mean the same. A new option needs an entry here, and
// an entry for an option that is gone fails too.
//
// The owner of a meaning follows the design: what every tier must agree on
// is the root vocabulary's, not an option (idem.MaxResult,
// idem.MaxFingerprint); a timeout belongs to whoever makes the call (the
// Store's calls to its tiers, the Redis layer's own round trips inside a
// Wait); the observer is the Store's, handed down through each call's
// context (idem.ContextWithObserver), and no layer or janitor has one of
// its own; the database's clock decides leases, so only the in-memory
// layer, which is its own database, has a clock to set. Options of the
// same name in the HTTP middleware and the gRPC interceptor set the same
// kind of thing for two different front doors, each its own.
var optionMeanings = map[string]string{
	// tiered: the Store.
	"tiered.WithSQL":           "the deciding tier of a Store",
	"tiered.WithRedis":         "the fast cross-instance tier of a Store",
	"tiered.WithLease":         "how long a claim lives without renewal",
	"tiered.WithRetention":     "how long a completed result is kept",
	"tiered.WithWait":          "how long a duplicate waits for the execution in flight",
	"tiered.WithTimeouts":      "the bound on each call the Store makes to a tier",
	"tiered.WithRedisFallback": "when the Store switches Redis off, and for how long",
	"tiered.WithLocalCache":    "the bounds of the Store's in-process cache of results",
	"tiered.WithObserver":      "who hears the events of a stack (Store, layers, janitor)",
	"tiered.WithLogger":        "who is told when a Store switches a tier off or on, or finds it misconfigured",
	"tiered.WithJanitor":       "the background sweeper a Store runs for its lifetime",
	"tiered.WithFailOpen":      "whether work runs without a decision when the deciding tier is down",
	"tiered.WithAtomic":        "whether an execution commits in one transaction with its own rows",

	// redislayer.
	"redislayer.WithPrefix":       "the prefix of the Redis keys and channels",
	"redislayer.WithTimeout":      "the bound on each round trip the Redis layer makes itself, inside a Wait",
	"redislayer.WithReserveOrder": "the order of the Redis Reserve's commands",

	// sqllayer.
	"sqllayer.WithRecordsTable":   "the table of idempotency records",
	"sqllayer.WithEventsTable":    "the table of processed events",
	"sqllayer.WithVersionsTable":  "the table of sync-job versions",
	"sqllayer.WithAuditTable":     "the table of operators' releases and forgets",
	"sqllayer.WithRetries":        "how often a statement that lost a deadlock runs again",
	"sqllayer.WithReserveOrder":   "the order of the SQL Reserve's statements",
	"sqllayer.WithEventRetention": "how long a processed event is kept",
	"sqllayer.WithBatchSize":      "how many concurrent calls one SQL statement carries",

	// memlayer.
	"memlayer.WithClock": "the in-memory layer's own clock, which decides its leases and expiries",

	// janitor.
	"janitor.WithInterval":      "how often the janitor sweeps",
	"janitor.WithBatch":         "how many rows one janitor DELETE removes",
	"janitor.WithLock":          "the Redis client of the lock that makes instances sweep in turn",
	"janitor.WithLockKey":       "the Redis key of the janitor's lock",
	"janitor.WithLockTTL":       "how long the janitor's lock lives without a refresh",
	"janitor.WithStatementTime": "how long one paced janitor DELETE aims to run",
	"janitor.WithDutyCycle":     "the share of a paced sweep's time spent in DELETE statements",
	"janitor.WithRate":          "the most rows a second a paced sweep deletes",

	// fingerprint: what "the same request" means.
	"fingerprint.WithAllow":              "the only body fields that count in a fingerprint",
	"fingerprint.WithDeny":               "body fields that never count in a fingerprint",
	"fingerprint.WithDefaultDeny":        "whether the default noisy fields are left out of a fingerprint",
	"fingerprint.WithMethod":             "whether the request method counts in a fingerprint",
	"fingerprint.WithRoute":              "what names the route in a fingerprint",
	"fingerprint.WithQuery":              "whether the query string counts in a fingerprint",
	"fingerprint.WithQueryAllow":         "the only query parameters that count in a fingerprint",
	"fingerprint.WithQueryDeny":          "query parameters that never count in a fingerprint",
	"fingerprint.WithHeaders":            "the request headers that count in a fingerprint",
	"fingerprint.WithMaxBytes":           "the largest input a fingerprint Builder hashes",
	"fingerprint.WithMaxDepth":           "the deepest JSON a fingerprint Builder reads",
	"fingerprint.WithCaseSensitiveNames": "whether JSON member names that differ in case are different fields",
	"fingerprint.WithJSONBodies":         "whether every body is read as JSON whatever its media type",

	// middleware: the HTTP front door.
	"middleware.WithKeyHeader":      "HTTP: the header that carries the key",
	"middleware.WithRequire":        "HTTP: whether a guarded request without a key is refused",
	"middleware.WithDerivedKey":     "HTTP: whether a missing key is derived from the fingerprint",
	"middleware.WithMethods":        "HTTP: the guarded methods",
	"middleware.WithScope":          "HTTP: the scope of a request's key",
	"middleware.WithSingleTenant":   "HTTP: that every caller shares one scope, said explicitly",
	"middleware.WithFingerprint":    "HTTP: what the same request means",
	"middleware.WithBodyLimit":      "HTTP: the largest request body read before a claim",
	"middleware.WithResponseLimit":  "HTTP: the largest response body stored",
	"middleware.WithKeep":           "HTTP: which statuses are kept as the key's answer",
	"middleware.WithReplayHeaders":  "HTTP: the response headers stored and replayed",
	"middleware.WithReplayMarker":   "HTTP: the header that marks a replay",
	"middleware.WithErrorWriter":    "HTTP: how the middleware's own answers are written",
	"middleware.WithStatuses":       "HTTP: the status codes of the middleware's own answers",
	"middleware.WithRetryAfter":     "HTTP: the Retry-After of retryable answers",
	"middleware.WithAnswerObserver": "HTTP: who hears each answer the middleware gives",

	// middleware: the server's half of the retry contract.
	"middleware.WithShouldRetryHeader": "HTTP: the header that says whether a retry can help",

	// idemgrpc: the gRPC front door.
	"idemgrpc.WithKeyName":        "gRPC: the metadata key that carries the key",
	"idemgrpc.WithRequire":        "gRPC: whether a call without a key is refused",
	"idemgrpc.WithScope":          "gRPC: the scope of a call's key",
	"idemgrpc.WithSingleTenant":   "gRPC: that every caller shares one scope, said explicitly",
	"idemgrpc.WithFingerprint":    "gRPC: what the same request message means",
	"idemgrpc.WithKeep":           "gRPC: which handler errors are kept as the key's answer",
	"idemgrpc.WithRetryDelays":    "gRPC: the RetryInfo delays of retryable answers",
	"idemgrpc.WithReplayHeader":   "gRPC: whether replays carry the replayed header",
	"idemgrpc.WithReplayMetadata": "gRPC: the metadata stored and replayed",
	"idemgrpc.WithPanicHandler":   "gRPC: who is told of a handler's panic",

	// idemgrpc: the client interceptor's own.
	"idemgrpc.WithAttempts":       "gRPC client: how many times one call is sent at most",
	"idemgrpc.WithAttemptTimeout": "gRPC client: the bound on one attempt of a call",
	"idemgrpc.WithDeadline":       "gRPC client: the bound on one call, retries and waits included",
	"idemgrpc.WithRetention":      "gRPC client: the server's retention, which the deadline must stay below",
	"idemgrpc.WithBackoff":        "gRPC client: the wait before a retry without RetryInfo",
	"idemgrpc.WithAttemptHook":    "gRPC client: who hears each attempt of a call",

	// idemwatermill: the queue consumer.
	"idemwatermill.WithConsumer":  "Watermill: the scope of a message's key",
	"idemwatermill.WithIdentity":  "Watermill: what identifies a message",
	"idemwatermill.WithRepublish": "Watermill: whether a duplicate republishes what the first run produced",
	"idemwatermill.WithNackDelay": "Watermill: how long a message in flight elsewhere is held before its nack",
	"idemwatermill.WithLogger":    "Watermill: who is told what the middleware cannot return",

	// client: the client half over HTTP.
	"client.WithKeyHeader":      "client: the header that carries the key",
	"client.WithMethods":        "client: the methods whose requests get a key",
	"client.WithAttempts":       "client: how many times one operation is sent at most",
	"client.WithAttemptTimeout": "client: the bound on one attempt until its answer's headers",
	"client.WithDeadline":       "client: the bound on one operation, retries and waits included",
	"client.WithRetention":      "client: the server's retention, which the deadline must stay below",
	"client.WithBackoff":        "client: the wait before a retry that no Retry-After names",
	"client.WithBodyLimit":      "client: the largest request body kept in memory to be sent again",
	"client.WithReplayMarker":   "client: the header by which the server marks a replay",
	"client.WithAttemptHook":    "client: who hears each attempt",

	// idemprom and idemotel: metrics and traces.
	"idemprom.WithNamespace":      "Prometheus: the metric namespace",
	"idemprom.WithBuckets":        "Prometheus: the histogram buckets",
	"idemotel.WithTracerProvider": "OpenTelemetry: the tracer provider",
	"idemotel.WithMeterProvider":  "OpenTelemetry: the meter provider",
}

// option is an exported With* function found in the sources.
type option struct {
	pkg, name string
	decl      *ast.FuncDecl
	pos       token.Position
}

// libraryOptions parses every library package of every module of the
// repository (all but internal packages, test rigs, benchmarks, examples and
// commands) and returns their exported With* functions by "pkg.WithX",
// and the Option type each of those packages declares.
func libraryOptions(t *testing.T) (map[string]option, map[string]*ast.TypeSpec) {
	t.Helper()
	fset := token.NewFileSet()
	opts := map[string]option{}
	types := map[string]*ast.TypeSpec{}
	dirs := map[string]string{} // package name → directory
	skip := map[string]bool{"internal": true, "testdata": true, "bench": true, "reliability": true, "cmd": true, "examples": true}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (skip[d.Name()] || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg, dir := f.Name.Name, filepath.Dir(path)
		if other, ok := dirs[pkg]; ok && other != dir {
			t.Errorf("two packages named %s (%s and %s): the table cannot tell their options apart", pkg, other, dir)
		}
		dirs[pkg] = dir
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil && strings.HasPrefix(decl.Name.Name, "With") && decl.Name.IsExported() {
					opts[pkg+"."+decl.Name.Name] = option{pkg, decl.Name.Name, decl, fset.Position(decl.Pos())}
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == "Option" {
						types[pkg] = ts
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return opts, types
}

// Every option has an entry in optionMeanings, every entry an option, and
// no two entries mean the same.
func TestOneOwnerPerSetting(t *testing.T) {
	opts, _ := libraryOptions(t)
	for key, o := range opts {
		if _, ok := optionMeanings[key]; !ok {
			t.Errorf("%s (%s) has no entry in optionMeanings: say what it means, and make sure no other option means it", key, o.pos)
		}
	}
	for key := range optionMeanings {
		if _, ok := opts[key]; ok {
			continue
		}
		pkg, _, _ := strings.Cut(key, ".")
		if _, err := os.Stat(pkg); err != nil {
			continue // a nested module absent from this copy (a module zip holds its own subtree)
		}
		t.Errorf("optionMeanings has an entry for %s, which does not exist", key)
	}
	owners := map[string][]string{}
	for key, meaning := range optionMeanings {
		m := strings.ToLower(strings.Join(strings.Fields(meaning), " "))
		owners[m] = append(owners[m], key)
	}
	for meaning, keys := range owners {
		if len(keys) > 1 {
			sort.Strings(keys)
			t.Errorf("%s all mean %q: one setting, one owner", strings.Join(keys, ", "), meaning)
		}
	}
}

// Every package's options have one shape, func(*config) error, so that an
// option can refuse what it is given and the constructor report it; and
// every With* returns its package's Option.
func TestOneOptionShape(t *testing.T) {
	opts, types := libraryOptions(t)
	checked := map[string]bool{}
	for key, o := range opts {
		if res := o.decl.Type.Results; res == nil || len(res.List) != 1 || !isIdent(res.List[0].Type, "Option") {
			t.Errorf("%s (%s) does not return its package's Option", key, o.pos)
		}
		if checked[o.pkg] {
			continue
		}
		checked[o.pkg] = true
		ts := types[o.pkg]
		if ts == nil {
			t.Errorf("package %s has options but no Option type", o.pkg)
			continue
		}
		ft, ok := ts.Type.(*ast.FuncType)
		shape := ok && ft.Params != nil && len(ft.Params.List) == 1 && len(ft.Params.List[0].Names) <= 1 &&
			isStarIdent(ft.Params.List[0].Type, "config") &&
			ft.Results != nil && len(ft.Results.List) == 1 && isIdent(ft.Results.List[0].Type, "error")
		if !shape {
			t.Errorf("%s.Option is not func(*config) error", o.pkg)
		}
	}
}

// An option's refusal names the option and says what to give instead:
// every message an option builds itself (errors.New, fmt.Errorf) starts
// "WithX: give ". The constructor adds "idem: configuration error: pkg: ".
func TestOptionErrorsSayWhatToGive(t *testing.T) {
	opts, _ := libraryOptions(t)
	for key, o := range opts {
		ast.Inspect(o.decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !(isIdent(sel.X, "errors") && sel.Sel.Name == "New" || isIdent(sel.X, "fmt") && sel.Sel.Name == "Errorf") {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			msg, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			if want := o.name + ": give "; !strings.HasPrefix(msg, want) {
				t.Errorf("%s (%s): the message %q does not start %q", key, o.pos, msg, want)
			}
			return true
		})
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func isStarIdent(e ast.Expr, name string) bool {
	s, ok := e.(*ast.StarExpr)
	return ok && isIdent(s.X, name)
}
