package idem_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// requirement is one line of a go.mod's require directives.
type requirement struct {
	path, version string
	indirect      bool
}

// requirements reads the require directives of the go.mod in dir, in both
// the one-line and the block form.
func requirements(t *testing.T, dir string) map[string]requirement {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatalf("reading %s/go.mod: %v", dir, err)
	}
	defer f.Close()
	reqs := map[string]requirement{}
	block := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, comment, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 2 && fields[0] == "require" && fields[1] == "(":
			block = true
			continue
		case block && len(fields) == 1 && fields[0] == ")":
			block = false
			continue
		case len(fields) == 3 && fields[0] == "require":
			fields = fields[1:]
		case !block || len(fields) != 2:
			continue
		}
		reqs[fields[0]] = requirement{fields[0], fields[1], strings.TrimSpace(comment) == "indirect"}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s/go.mod: %v", dir, err)
	}
	return reqs
}

// floorTables parses docs/dependencies.md: under each "## `dir`" heading, a
// table whose rows start "| `path` | `version` |", with "(indirect)" after
// the path of an indirect requirement.
func floorTables(t *testing.T) map[string][]requirement {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("docs", "dependencies.md"))
	if err != nil {
		t.Fatalf("reading the floors: %v", err)
	}
	tables := map[string][]requirement{}
	dir := ""
	for _, line := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			dir = strings.Trim(h, "`")
			tables[dir] = nil
			continue
		}
		if dir == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("floor row %q has too few cells", line)
		}
		name, version := strings.TrimSpace(cells[1]), strings.Trim(strings.TrimSpace(cells[2]), "`")
		path, rest, _ := strings.Cut(strings.TrimPrefix(name, "`"), "`")
		tables[dir] = append(tables[dir], requirement{path, version, strings.TrimSpace(rest) == "(indirect)"})
	}
	return tables
}

// semverLess reports whether version a precedes b, for the release and
// pseudo-versions found in go.mod files ("v1.2.3", "v1.2.3-pre",
// "v0.0.0-20240101000000-abcdef"); a build suffix ("+incompatible") is
// ignored.
func semverLess(a, b string) bool {
	split := func(v string) ([3]int, string) {
		v, _, _ = strings.Cut(strings.TrimPrefix(v, "v"), "+")
		core, pre, _ := strings.Cut(v, "-")
		var n [3]int
		for i, p := range strings.SplitN(core, ".", 3) {
			n[i], _ = strconv.Atoi(p)
		}
		return n, pre
	}
	an, ap := split(a)
	bn, bp := split(b)
	if an != bn {
		for i := range an {
			if an[i] != bn[i] {
				return an[i] < bn[i]
			}
		}
	}
	switch {
	case ap == bp:
		return false
	case ap == "":
		return false // a release follows its pre-releases
	case bp == "":
		return true
	}
	return ap < bp // pseudo-versions: timestamps sort as strings
}

// Every module's requirements are at or above the floors that
// docs/dependencies.md lists with the advisories they avoid; every direct
// requirement is listed, and no row names a requirement that is gone.
func TestDependencyFloors(t *testing.T) {
	tables := floorTables(t)
	for _, dir := range modules(t) {
		dir = filepath.ToSlash(dir)
		t.Run(dir, func(t *testing.T) {
			rows, ok := tables[dir]
			if !ok {
				t.Fatalf("docs/dependencies.md has no table for the module in %s", dir)
			}
			reqs := requirements(t, dir)
			listed := map[string]bool{}
			for _, row := range rows {
				listed[row.path] = true
				req, ok := reqs[row.path]
				switch {
				case !ok:
					t.Errorf("%s: the floor of %s is listed, but go.mod no longer requires it", dir, row.path)
				case semverLess(req.version, row.version):
					t.Errorf("%s: go.mod requires %s %s, below its floor %s", dir, row.path, req.version, row.version)
				case req.indirect != row.indirect:
					t.Errorf("%s: %s is listed as indirect=%v, go.mod says indirect=%v", dir, row.path, row.indirect, req.indirect)
				}
			}
			for _, req := range reqs {
				if !req.indirect && !listed[req.path] && !strings.HasPrefix(req.path, "github.com/idemkit/idem") {
					t.Errorf("%s: the direct requirement %s %s has no floor in docs/dependencies.md", dir, req.path, req.version)
				}
			}
		})
	}
}

func TestSemverLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		less bool
	}{
		{"v5.0.0", "v5.3.0", true},
		{"v5.3.0", "v5.3.0", false},
		{"v1.10.0", "v1.9.1", false},
		{"v1.9.0", "v1.9.1", true},
		{"v0.59.0", "v0.59.1", true},
		{"v1.0.0-rc.1", "v1.0.0", true},
		{"v0.0.0-20240101000000-abcdef", "v0.0.0-20250101000000-abcdef", true},
		{"v3.2.2+incompatible", "v3.2.2", false},
	} {
		if got := semverLess(tc.a, tc.b); got != tc.less {
			t.Errorf("semverLess(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.less)
		}
	}
}
