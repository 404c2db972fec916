package idem_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestExamplesPaste checks that every Example function of the repository's
// public packages reads as code a user can copy into their own main: its
// body names no declaration of its own directory other than the Example
// functions (an unexported test helper, or an unqualified name of the
// package under test), and its file imports no internal package. A
// Postgres DSN an example shows sets connect_timeout, as the README asks.
func TestExamplesPaste(t *testing.T) {
	var bad []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "internal") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		bad = append(bad, unpastable(t, path)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// unpastable reports the Example functions of the file at path that lean on
// something a user's program would not have.
func unpastable(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	var examples []*ast.FuncDecl
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
			examples = append(examples, fn)
		}
	}
	if len(examples) == 0 {
		return nil
	}
	var bad []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") {
			bad = append(bad, path+": imports "+p+", which a user cannot import")
		}
	}
	declared := directoryDecls(t, filepath.Dir(path), f.Name.Name)
	for _, fn := range examples {
		local := localNames(fn.Body)
		seen := map[string]bool{}
		inspectIdents(fn.Body, func(id *ast.Ident) {
			if id.Name == "_" || local[id.Name] || !declared[id.Name] || strings.HasPrefix(id.Name, "Example") || seen[id.Name] {
				return
			}
			seen[id.Name] = true
			bad = append(bad, fset.Position(id.Pos()).String()+": "+fn.Name.Name+" uses "+id.Name+", declared beside it rather than by an import")
		})
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err == nil && (strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://")) && !strings.Contains(v, "connect_timeout=") {
				bad = append(bad, fset.Position(lit.Pos()).String()+": "+fn.Name.Name+" shows a Postgres DSN without connect_timeout")
			}
			return true
		})
	}
	return bad
}

// localNames lists the names body declares itself: variables, constants,
// types, and the parameters of its function literals.
func localNames(body *ast.BlockStmt) map[string]bool {
	names := map[string]bool{}
	add := func(exprs ...ast.Expr) {
		for _, e := range exprs {
			if id, ok := e.(*ast.Ident); ok {
				names[id.Name] = true
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				add(n.Lhs...)
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				add(n.Key, n.Value)
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				names[id.Name] = true
			}
		case *ast.TypeSpec:
			names[n.Name.Name] = true
		case *ast.FuncType:
			for _, l := range []*ast.FieldList{n.Params, n.Results} {
				if l == nil {
					continue
				}
				for _, fld := range l.List {
					for _, id := range fld.Names {
						names[id.Name] = true
					}
				}
			}
		}
		return true
	})
	return names
}

// directoryDecls lists the package-level names declared by the files of dir
// that belong to package pkg (test files and, for an internal test, the
// package itself).
func directoryDecls(t *testing.T, dir, pkg string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	names := map[string]bool{}
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range matches {
		f, err := parser.ParseFile(fset, m, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", m, err)
		}
		if f.Name.Name != pkg {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					}
				}
			}
		}
	}
	return names
}

// inspectIdents calls fn for each identifier of n that names something by
// itself: not the selected name of a selector, nor a field key of a
// composite literal.
func inspectIdents(n ast.Node, fn func(*ast.Ident)) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			inspectIdents(n.X, fn)
			return false
		case *ast.CompositeLit:
			if n.Type != nil {
				inspectIdents(n.Type, fn)
			}
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if _, isIdent := kv.Key.(*ast.Ident); !isIdent {
						inspectIdents(kv.Key, fn)
					}
					inspectIdents(kv.Value, fn)
					continue
				}
				inspectIdents(e, fn)
			}
			return false
		case *ast.Ident:
			fn(n)
		}
		return true
	})
}
