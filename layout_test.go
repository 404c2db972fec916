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

// sqlDrivers are the import paths of SQL drivers. The core links none: a
// program links the driver of the database it uses and no other.
var sqlDrivers = []string{"github.com/jackc/", "github.com/go-sql-driver/", "modernc.org/sqlite", "github.com/lib/pq", "github.com/mattn/"}

// The layout rules of the design, checked on the real import graph: the
// root package has no third-party imports, the layers never import each
// other, HTTP frameworks appear only in their adapters, and no package of
// the core links a SQL driver.
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	const mod = "github.com/idemkit/idem"
	frameworks := []string{"github.com/gin-gonic/", "github.com/labstack/echo", "github.com/go-chi/"}
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{mod, []string{"."}}, // "." matches any path with a dot: no third-party module
		{mod + "/memlayer", append([]string{mod + "/redislayer", mod + "/sqllayer", mod + "/tiered"}, frameworks...)},
		{mod + "/redislayer", append([]string{mod + "/sqllayer", mod + "/memlayer", mod + "/tiered", "net/http"}, frameworks...)},
		{mod + "/sqllayer", append([]string{mod + "/redislayer", mod + "/memlayer", mod + "/tiered", "net/http"}, frameworks...)},
		{mod + "/tiered", append([]string{mod + "/redislayer", mod + "/sqllayer", mod + "/memlayer", "github.com/redis/", "github.com/uptrace/"}, frameworks...)},
		{mod + "/fingerprint", frameworks},
		// A middleware + memlayer user links neither bun nor go-redis:
		// completing in the handler's transaction goes through the
		// reservation in the root package, never through sqllayer.
		{mod + "/middleware", append([]string{mod + "/sqllayer", mod + "/redislayer", "github.com/uptrace/", "github.com/redis/"}, frameworks...)},
	} {
		t.Run(strings.TrimPrefix(tc.pkg, mod+"/"), func(t *testing.T) {
			for _, d := range deps(t, tc.pkg) {
				if d == tc.pkg {
					continue
				}
				for _, f := range tc.forbidden {
					bad := strings.HasPrefix(d, f)
					if f == "." {
						first, _, _ := strings.Cut(d, "/")
						bad = strings.Contains(first, ".")
					}
					if bad {
						t.Errorf("%s imports %s", tc.pkg, d)
					}
				}
			}
		})
	}
	t.Run("no SQL driver", func(t *testing.T) {
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
			mod + "/middleware", mod + "/memlayer", mod + "/storetest"} {
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
			}
		}
	})
}

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
