package idem_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CHANGELOG.md is in Keep a Changelog form: its first section is
// "## [Unreleased]", where the changes since the last release are gathered
// until a release renames it.
func TestChangelogHasUnreleased(t *testing.T) {
	b, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatalf("the repository has no CHANGELOG.md: %v", err)
	}
	var first string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			first = strings.TrimSpace(line)
			break
		}
	}
	if first != "## [Unreleased]" {
		t.Errorf("CHANGELOG.md's first section is %q, want \"## [Unreleased]\"", first)
	}
}

// docs/releasing.md says how every module is tagged: it names the core's
// tag form and, in backquotes, the directory of every nested module with a
// go.mod, so that a new module cannot be left out of a release. In the
// core's module zip, which holds no nested module, the core alone is
// checked.
func TestReleasingNamesEveryModule(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("docs", "releasing.md"))
	if err != nil {
		t.Fatalf("the repository has no docs/releasing.md: %v", err)
	}
	doc := string(b)
	for _, dir := range modules(t) {
		dir = filepath.ToSlash(dir)
		want := "`" + dir + "`"
		if dir == "." {
			want = "`vX.Y.Z`"
		}
		if !strings.Contains(doc, want) {
			t.Errorf("docs/releasing.md does not name module %s (%s)", dir, want)
		}
	}
}
