package idemtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// endingsTable renders Endings as the Markdown table docs/http.md publishes.
func endingsTable() string {
	var b strings.Builder
	b.WriteString("| the handler … | reservation | the first caller gets | stored | a retry gets | runs | in the atomic mode |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, e := range Endings() {
		res := ""
		if e.Reservation {
			res = "yes"
		}
		atomic := e.Atomic
		if atomic == "" {
			atomic = "the same"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %s |\n", e.Name, res, e.First, e.Stored, e.Retry, e.Runs, atomic)
	}
	return b.String()
}

// docs/http.md publishes the handler-ending table as the contract: it must
// be Endings, row for row. IDEM_PRINT_ENDINGS=1 prints the table to paste.
func TestGuideEndings(t *testing.T) {
	want := endingsTable()
	if os.Getenv("IDEM_PRINT_ENDINGS") != "" {
		fmt.Print(want)
	}
	guide, err := os.ReadFile("../../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), want) {
		t.Fatalf("docs/http.md does not publish the handler-ending table as Endings gives it; run with IDEM_PRINT_ENDINGS=1 and paste:\n%s", want)
	}
	seen := map[string]bool{}
	for _, e := range Endings() {
		if seen[e.Name] {
			t.Fatalf("two rows named %q", e.Name)
		}
		seen[e.Name] = true
		if e.Runs < 1 || e.First == "" || e.Stored == "" || e.Retry == "" {
			t.Fatalf("row %q is incomplete: %+v", e.Name, e)
		}
	}
}
