package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// otherDrivers are the SQL drivers a pgx program must not link.
var otherDrivers = []string{"github.com/go-sql-driver/", "modernc.org/sqlite", "github.com/lib/pq", "github.com/mattn/"}

// The service links pgx and no other SQL driver, idem's packages
// included: go list -deps of its packages names none.
func TestNoSecondDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	pgx := false
	for _, d := range deps {
		pgx = pgx || strings.HasPrefix(d, "github.com/jackc/pgx/v5")
		for _, o := range otherDrivers {
			if strings.HasPrefix(d, o) {
				t.Errorf("the service links %s, a second SQL driver", d)
			}
		}
	}
	if !pgx {
		t.Fatalf("go list -deps names no pgx package: %q", deps)
	}
}

// The team's own code imports the standard library, pgx, chi, its sqlc
// package and idem's public packages: no bun, no other driver, nothing of
// idem's internals. bun is in the build only through idem's tier.
func TestOwnImports(t *testing.T) {
	allowed := []string{"github.com/jackc/pgx/v5", "github.com/go-chi/chi/v5", "github.com/idemkit/idem"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("db/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	own := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		own++
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range parsed.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(path, "/")
			if !strings.Contains(first, ".") {
				continue // the standard library
			}
			ok := false
			for _, a := range allowed {
				ok = ok || path == a || strings.HasPrefix(path, a+"/")
			}
			if !ok || strings.Contains(path, "/internal/") || strings.HasPrefix(path, "github.com/uptrace/") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
	if own < 6 {
		t.Fatalf("found %d source files of the service, want its own and its db package's", own)
	}
}
