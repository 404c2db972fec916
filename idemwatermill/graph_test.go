package idemwatermill_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A user's module that requires idemwatermill, as `go mod tidy` leaves it:
// its module graph names no HTTP framework (Gin, Echo) and its program
// links none (nor chi, which Watermill's own go.mod names for its HTTP
// components), nor gRPC.
func TestUserModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/consumer\n\ngo 1.25.0\n\n"+
		"require github.com/idemkit/idem/idemwatermill v0.0.0-00010101000000-000000000000\n\n"+
		"replace github.com/idemkit/idem/idemwatermill => "+here+"\n\n"+
		"replace github.com/idemkit/idem => "+filepath.Dir(here)+"\n")
	write("main.go", `package main

import (
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/idemkit/idem/idemwatermill"
	"github.com/idemkit/idem/memlayer"
	"github.com/idemkit/idem/tiered"
)

func main() {
	mem, _ := memlayer.New()
	store, _ := tiered.New(tiered.WithSQL(mem))
	mw, _ := idemwatermill.New(store)
	var _ message.HandlerMiddleware = mw
}
`)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// Offline, from the module cache this module's own build filled.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// -e: tidy also looks for the packages the dependencies' own tests
	// import (testify, for Watermill's), which the cache may not hold
	// offline; the user's build needs none of them.
	run("mod", "tidy", "-e")
	graph := run("mod", "graph")
	for _, framework := range []string{"github.com/gin-gonic/gin@", "github.com/labstack/echo"} {
		if strings.Contains(graph, framework) {
			t.Errorf("the module graph names %s", framework)
		}
	}
	for _, pkg := range strings.Fields(run("list", "-deps", "-f", "{{.ImportPath}}", ".")) {
		for _, heavy := range []string{"github.com/gin-gonic/", "github.com/labstack/echo", "github.com/go-chi/", "google.golang.org/grpc"} {
			if strings.HasPrefix(pkg, heavy) {
				t.Errorf("the program links %s", pkg)
			}
		}
	}
}
