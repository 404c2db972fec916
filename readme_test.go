package idem_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// README.md's package table names every package a user can import, and
// nothing that is not one: a package added, moved or removed fails here
// until the table says so. Directories of nested modules absent from this
// copy (a published module zip holds its own subtree only) are not looked
// for.
func TestReadmePackageTable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start := strings.Index(s, "\n## Packages\n")
	if start < 0 {
		t.Fatal("README.md has no Packages section")
	}
	table := s[start:]
	if end := strings.Index(table[1:], "\n## "); end >= 0 {
		table = table[:end+1]
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cell, -1) {
			listed[m[1]] = true
		}
	}
	found := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "internal" || name == "docs"):
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dir := filepath.ToSlash(filepath.Dir(path))
			if dir == "." {
				dir = "idem"
			}
			found[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range found {
		if !listed[dir] {
			t.Errorf("README.md's package table does not list %s", dir)
		}
	}
	for name := range listed {
		if name == "idem" {
			continue
		}
		if _, err := os.Stat(name); err == nil && !found[name] {
			t.Errorf("README.md's package table lists %s, which holds no package", name)
		}
	}
}
