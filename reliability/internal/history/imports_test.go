package history_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The checker judges what was recorded and nothing else: it imports no
// package of idem (the workload maps the Store's answers to outcomes), so
// a change to the Store can never change the verdict's meaning.
func TestImportsNothingOfIdem(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	const self = "github.com/idemkit/idem/reliability/internal/history"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", self).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if strings.HasPrefix(d, "github.com/idemkit/idem") && d != self {
			t.Errorf("%s imports %s", self, d)
		}
		if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") && !strings.HasPrefix(d, "github.com/idemkit/idem") {
			t.Errorf("%s imports the third-party %s", self, d)
		}
	}
}
