package idem_test

import (
	"go/format"
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

// README.md's first quick start is middleware.Example_embedded as a
// program: its imports and its body in func main, gofmt-clean, so that a
// user who pastes it runs what make test runs.
func TestReadmeQuickStartIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start := strings.Index(s, "```go\npackage main\n")
	if start < 0 {
		t.Fatal("README.md has no quick start program (a go block starting package main)")
	}
	block := s[start+len("```go\n"):]
	block = block[:strings.Index(block, "```\n")]
	ex, err := os.ReadFile(filepath.Join("middleware", "embedded_example_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	e := string(ex)
	imports := e[strings.Index(e, "import ("):]
	imports = imports[:strings.Index(imports, "\n)\n")+3]
	body := e[strings.Index(e, "func Example_embedded() {\n")+len("func Example_embedded() {\n"):]
	body = body[:strings.Index(body, "\t// Output:")]
	want := "package main\n\n" + imports + "\nfunc main() {\n" + body + "}\n"
	if block != want {
		t.Errorf("README.md's quick start is not middleware.Example_embedded as a program; want:\n%s", want)
	}
	formatted, err := format.Source([]byte(block))
	if err != nil {
		t.Fatalf("README.md's quick start does not parse: %v", err)
	}
	if string(formatted) != block {
		t.Errorf("README.md's quick start is not gofmt-clean")
	}
}
