package idem_test

import (
	"os/exec"
	"strings"
	"testing"
)

// deps lists the packages pkg imports, directly or not (standard library
// included), as the go command resolves them.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// integration reports whether pkg is in one of the integration modules,
// which the go command sees from here only through the workspace.
func integration(pkg string) bool {
	for _, m := range []string{"/middleware/idemgin", "/middleware/idemecho", "/idemprom", "/idemotel", "/idemgrpc", "/idemwatermill", "/idempgx"} {
		if strings.HasSuffix(pkg, m) {
			return true
		}
	}
	return false
}

// inWorkspace reports whether the go command runs in the repository's
// workspace.
func inWorkspace(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		t.Fatalf("go env GOWORK: %v", err)
	}
	w := strings.TrimSpace(string(out))
	return w != "" && w != "off"
}

// sqlDrivers are the import paths of SQL drivers. The core links none: a
// program links the driver of the database it uses and no other.
var sqlDrivers = []string{"github.com/jackc/", "github.com/go-sql-driver/", "modernc.org/sqlite", "github.com/lib/pq", "github.com/mattn/"}

// thirdParty, in a list of forbidden imports, matches a package of any
// module but the core and the standard library.
const thirdParty = "third-party"

// The layout rules of the design, checked on the real import graph: the
// root package links nothing outside the standard library, the layers never
// import each other, HTTP frameworks appear only in their adapters, and no
// package of the core links a SQL driver.
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	const mod = "github.com/idemkit/idem"
	// heavy are the frameworks and the metrics, tracing and RPC libraries:
	// only the integration modules may link them, each its own.
	gin, echo, chi := "github.com/gin-gonic/", "github.com/labstack/echo", "github.com/go-chi/"
	prom, otel, grpc := "github.com/prometheus/", "go.opentelemetry.io/", "google.golang.org/grpc"
	heavy := []string{gin, echo, chi, prom, otel, grpc}
	but := func(allowed ...string) []string {
		var out []string
	next:
		for _, h := range heavy {
			for _, a := range allowed {
				if h == a {
					continue next
				}
			}
			out = append(out, h)
		}
		return out
	}
	with := func(extra ...string) []string { return append(extra, heavy...) }
	// allowed are the imports a package may have that its forbidden
	// prefixes match. The root may import internal/reservation, the
	// protocol behind its Reservation: the root cannot export that protocol
	// without making it users' API, and links it in instead (see that
	// package). It imports the standard library only (its rule below), so
	// the root still links nothing else.
	allowed := map[string][]string{
		mod: {mod + "/internal/reservation"},
	}
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{mod, []string{"."}}, // "." matches any path with a dot: no third-party module
		{mod + "/memlayer", with(mod+"/redislayer", mod+"/sqllayer", mod+"/tiered")},
		{mod + "/redislayer", with(mod+"/sqllayer", mod+"/memlayer", mod+"/tiered", "net/http")},
		{mod + "/sqllayer", with(mod+"/redislayer", mod+"/memlayer", mod+"/tiered", "net/http")},
		{mod + "/tiered", with(mod+"/redislayer", mod+"/sqllayer", mod+"/memlayer", mod+"/janitor", "github.com/redis/", "github.com/uptrace/")},
		{mod + "/janitor", with(mod+"/redislayer", mod+"/tiered", "net/http", "github.com/uptrace/")},
		{mod + "/fingerprint", heavy},
		// A middleware + memlayer user links neither bun nor go-redis:
		// completing in the handler's transaction goes through the
		// reservation (the root package and internal/reservation), never
		// through sqllayer.
		{mod + "/middleware", with(mod+"/sqllayer", mod+"/redislayer", "github.com/uptrace/", "github.com/redis/")},
		{mod + "/storetest", heavy},
		// The client half links net/http and the root's vocabulary only: a
		// service that calls an idem server links no store, no driver and
		// no framework.
		{mod + "/client", []string{thirdParty, mod + "/tiered", mod + "/redislayer", mod + "/sqllayer", mod + "/memlayer",
			mod + "/middleware", mod + "/fingerprint", mod + "/janitor"}},
		// The integration modules link their own library and no other.
		{mod + "/middleware/idemgin", but(gin)},
		{mod + "/middleware/idemecho", but(echo)},
		{mod + "/idemprom", but(prom)},
		{mod + "/idemotel", but(otel)},
		{mod + "/idemgrpc", but(grpc)},
		{mod + "/idemwatermill", heavy},
		// The pgx module links pgx and no other SQL driver.
		{mod + "/idempgx", with("github.com/go-sql-driver/", "modernc.org/sqlite", "github.com/lib/pq", "github.com/mattn/")},
		// The kit runs in users' tests: the standard library and the core
		// packages it needs, no third-party module (no framework, no
		// client, no driver) and no test rig that opens services.
		{mod + "/middleware/idemtest", []string{thirdParty, mod + "/redislayer", mod + "/sqllayer",
			mod + "/internal/testkit/stacktest", mod + "/internal/testkit/testenv"}},
		// The machinery the Store is built on is generic: the standard
		// library only, nothing of idem, so that no decision of the
		// protocol moves into it unseen.
		{mod + "/internal/flight", []string{"."}},
		{mod + "/internal/lru", []string{"."}},
		{mod + "/internal/deadline", []string{"."}},
		{mod + "/internal/schedule", []string{"."}},
		{mod + "/internal/breaker", []string{"."}},
		{mod + "/internal/guess", []string{"."}},
		// The protocol behind idem.Reservation: the root imports it, so it
		// imports the standard library only (nothing of idem: a cycle).
		{mod + "/internal/reservation", []string{"."}},
	} {
		t.Run(strings.TrimPrefix(tc.pkg, mod+"/"), func(t *testing.T) {
			if integration(tc.pkg) && !inWorkspace(t) {
				t.Skip("the integration modules are seen through the workspace (go.work); GOWORK=off hides them")
			}
		deps:
			for _, d := range deps(t, tc.pkg) {
				if d == tc.pkg {
					continue
				}
				for _, a := range allowed[tc.pkg] {
					if d == a {
						continue deps
					}
				}
				for _, f := range tc.forbidden {
					bad := strings.HasPrefix(d, f)
					first, _, _ := strings.Cut(d, "/")
					switch f {
					case ".":
						bad = strings.Contains(first, ".")
					case thirdParty:
						bad = strings.Contains(first, ".") && d != mod && !strings.HasPrefix(d, mod+"/")
					}
					if bad {
						t.Errorf("%s imports %s", tc.pkg, d)
					}
				}
			}
		})
	}
	t.Run("no SQL driver, no integration library", func(t *testing.T) {
		out, err := exec.Command("go", "list", "./...").Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		core := map[string]bool{}
		for _, pkg := range strings.Fields(string(out)) {
			if !strings.HasPrefix(pkg, mod+"/internal/testkit/") { // the test rigs open every database
				core[pkg] = true
			}
		}
		for _, pkg := range []string{mod, mod + "/tiered", mod + "/redislayer", mod + "/sqllayer", mod + "/fingerprint",
			mod + "/middleware", mod + "/middleware/idemtest", mod + "/memlayer", mod + "/storetest", mod + "/client"} {
			if !core[pkg] {
				t.Errorf("%s is not a package of the core module", pkg)
			}
		}
		for pkg := range core {
			for _, d := range deps(t, pkg) {
				for _, driver := range sqlDrivers {
					if strings.HasPrefix(d, driver) {
						t.Errorf("%s links the SQL driver package %s", pkg, d)
					}
				}
				for _, lib := range integrations {
					if strings.HasPrefix(d, lib) {
						t.Errorf("%s links %s, which belongs in an integration module of its own", pkg, d)
					}
				}
			}
		}
	})
}

// integrations are the import paths of the libraries that only the
// integration modules (idemgin, idemecho, idemgrpc, idemwatermill, idemprom, idemotel)
// may link: no package of the core does.
var integrations = []string{"github.com/gin-gonic/", "github.com/labstack/echo", "google.golang.org/grpc",
	"google.golang.org/protobuf", "google.golang.org/genproto", "github.com/prometheus/", "go.opentelemetry.io/",
	"github.com/ThreeDotsLabs/"}

// Every package of the module has a doc.go.
func TestEveryPackageHasDocGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}} {{join .GoFiles \",\"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, files, _ := strings.Cut(line, " ")
		if files == "" {
			continue // a package of tests only
		}
		if !strings.Contains(","+files+",", ",doc.go,") {
			t.Errorf("%s has no doc.go", dir)
		}
	}
}

// No nested module's package imports an internal package of the core: what
// an integration needs of the core is public API, covered by the API check.
// (Its tests may use the core's test rigs.)
func TestNestedModulesImportNoCoreInternals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	if !inWorkspace(t) {
		t.Skip("the integration modules are seen through the workspace (go.work); GOWORK=off hides them")
	}
	const mod = "github.com/idemkit/idem"
	for _, dir := range []string{"middleware/idemgin", "middleware/idemecho", "idemprom", "idemotel", "idemgrpc", "idemwatermill", "idempgx"} {
		cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "./...")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, imports, _ := strings.Cut(line, ": ")
			for _, imp := range strings.Fields(imports) {
				if strings.HasPrefix(imp, mod+"/internal/") {
					t.Errorf("%s imports the core's internal package %s", pkg, imp)
				}
			}
		}
	}
}
