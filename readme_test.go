package idem_test

import (
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// docs/packages.md, which README.md links, names every package of the
// repository, and nothing that is not one: a package added, moved or removed fails here
// until the table says so. Directories of nested modules absent from this
// copy (a published module zip holds its own subtree only) are not looked
// for.
func TestPackageTable(t *testing.T) {
	doc, err := os.ReadFile("docs/packages.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(doc)
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
			t.Errorf("docs/packages.md does not list %s", dir)
		}
	}
	for name := range listed {
		if name == "idem" {
			continue
		}
		if _, err := os.Stat(name); err == nil && !found[name] {
			t.Errorf("docs/packages.md lists %s, which holds no package", name)
		}
	}
}

// README.md's two commands are the demonstration and the tests, and both
// exist as written: a main package at ./cmd/idemdemo, a test target in the
// Makefile, and CI runs that same target.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "## Two commands\n\n```sh\ngo run ./cmd/idemdemo     # the demonstration\nmake test                 # the tests\n```\n"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md's two commands are not, as a block:\n%s", want)
	}
	if !holdsMain(t, filepath.Join("cmd", "idemdemo")) {
		t.Error("cmd/idemdemo, which README.md runs, holds no main package")
	}
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^test:`).Match(makefile) {
		t.Error("the Makefile has no test target")
	}
	ci, err := os.ReadFile(filepath.Join(".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test$`).Match(ci) {
		t.Error(".ci/run does not run make test, the test command README.md gives")
	}
}

// holdsMain reports whether a file of dir other than a test declares
// package main.
func holdsMain(t *testing.T, dir string) bool {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), m, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatalf("parsing %s: %v", m, err)
		}
		if f.Name.Name == "main" {
			return true
		}
	}
	return false
}

// Every Go block of README.md copies a runnable Example, named on the line
// before it (<!-- example: DIR.ExampleName -->, DIR relative to the root):
// a block that starts with package main is the Example as a program (its
// file's imports and its body in func main); any other block is a run of
// the Example's lines, less their common indentation. Every block is
// gofmt-clean. So a user who pastes it has the code make test ran, and an
// Example changed without its copy fails here.
func TestReadmeGoBlocks(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	marker := regexp.MustCompile(`^<!-- example: ([a-z0-9/]+)\.(Example\w*) -->$`)
	blocks := 0
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```go" {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		block := strings.Join(lines[start:end], "\n") + "\n"
		i = end
		blocks++
		var m []string
		if start >= 2 {
			m = marker.FindStringSubmatch(lines[start-2])
		}
		if m == nil {
			t.Errorf("README.md:%d: a Go block without <!-- example: DIR.ExampleName --> on the line before it", start)
			continue
		}
		name := m[1] + "." + m[2]
		formatted, err := format.Source([]byte(block))
		if err != nil {
			t.Errorf("README.md:%d: the copy of %s does not parse: %v", start, name, err)
		} else if string(formatted) != block {
			t.Errorf("README.md:%d: the copy of %s is not gofmt-clean", start, name)
		}
		file, body := exampleSource(t, m[1], m[2])
		if body == "" {
			t.Errorf("README.md:%d: %s is no Example of %s", start, name, m[1])
			continue
		}
		if strings.HasPrefix(block, "package main\n") {
			imports := file[strings.Index(file, "import ("):]
			imports = imports[:strings.Index(imports, "\n)\n")+3]
			code := body
			if i := strings.Index(code, "\t// Output:"); i >= 0 {
				code = code[:i]
			}
			if want := "package main\n\n" + imports + "\nfunc main() {\n" + code + "}\n"; block != want {
				t.Errorf("README.md:%d: the program is not %s as a program; want:\n%s", start, name, want)
			}
			continue
		}
		if !containsRun(body, block) {
			t.Errorf("README.md:%d: the block is not a run of %s's lines (less their indentation); the Example has:\n%s", start, name, body)
		}
	}
	if blocks == 0 {
		t.Fatal("README.md has no Go block")
	}
}

// exampleSource returns the source of the file in dir that declares the
// Example function name, and that function's body (between its braces), or
// "" for both when none does.
func exampleSource(t *testing.T, dir, name string) (file, body string) {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(filepath.FromSlash(dir), "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range matches {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", path, err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != name {
				continue
			}
			open := fset.Position(fn.Body.Lbrace).Offset + 1
			closing := fset.Position(fn.Body.Rbrace).Offset
			return string(src), strings.TrimPrefix(string(src[open:closing]), "\n")
		}
	}
	return "", ""
}

// containsRun reports whether block's lines are consecutive lines of body
// once the lines taken from body lose the indentation they share.
func containsRun(body, block string) bool {
	want := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	have := strings.Split(body, "\n")
	for i := 0; i+len(want) <= len(have); i++ {
		run := have[i : i+len(want)]
		indent, first := "", true
		for _, l := range run {
			if strings.TrimSpace(l) == "" {
				continue
			}
			if lead := l[:len(l)-len(strings.TrimLeft(l, "\t"))]; first || len(lead) < len(indent) {
				indent, first = lead, false
			}
		}
		same := true
		for j, l := range run {
			if strings.TrimPrefix(l, indent) != want[j] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// Every relative link of README.md and the guides leads to a file of the
// repository, and a link's #fragment to a heading of that file (as GitHub
// makes anchors of headings).
func TestDocLinks(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range append([]string{"README.md", "CHANGELOG.md"}, docs...) {
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(src), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), filepath.FromSlash(path))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s links %s, which does not exist", doc, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !anchors(t, file)[frag] {
				t.Errorf("%s links %s: %s has no heading #%s", doc, target, file, frag)
			}
		}
	}
}

// anchors returns the fragments GitHub gives the headings of the Markdown
// file at path: lower case, spaces to hyphens, punctuation dropped, and a
// repeated one numbered.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			found[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			found[a] = true
		}
		seen[a]++
	}
	return found
}
