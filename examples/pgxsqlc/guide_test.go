package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// guideBlocks returns the go blocks of the markdown file at path.
func guideBlocks(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	s := string(raw)
	for {
		i := strings.Index(s, "```go\n")
		if i < 0 {
			return blocks
		}
		s = s[i+len("```go\n"):]
		j := strings.Index(s, "```\n")
		if j < 0 {
			t.Fatalf("%s: a go block that does not end", path)
		}
		blocks = append(blocks, s[:j])
		s = s[j:]
	}
}

// dedented returns text with n leading tabs taken off every line that
// has them: a block copied from inside a function reads at the margin.
func dedented(text string, n int) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		for range n {
			l = strings.TrimPrefix(l, "\t")
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

// The "pgx and sqlc" guide's code is this example's: each of its go
// blocks is a part of one of the example's files, word for word (at most
// its indentation taken off), so that what the guide shows is what the
// example's test runs.
func TestGuideIsTheExample(t *testing.T) {
	blocks := guideBlocks(t, filepath.Join("..", "..", "docs", "pgx.md"))
	if len(blocks) < 6 {
		t.Fatalf("docs/pgx.md has %d go blocks, want the flow's (the tier, the router, the handler, the savepoint, the atomic handler, the consumer)", len(blocks))
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("db/*.go")
	var sources []string
	for _, f := range append(files, more...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n := range 4 {
			sources = append(sources, dedented(string(b), n))
		}
	}
	for i, b := range blocks {
		found := false
		for _, s := range sources {
			found = found || strings.Contains(s, b)
		}
		if !found {
			first, _, _ := strings.Cut(b, "\n")
			t.Errorf("docs/pgx.md's go block %d (%q…) is not a part of the example's files", i+1, first)
		}
	}
}
