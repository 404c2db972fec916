package idem_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// modules lists the directories of the repository that hold a go.mod,
// relative to the root ("." for the core), found by walking the tree; the
// nested modules are not in the core's module zip, only in the repository.
func modules(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name()[0] == '.' || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the repository: %v", err)
	}
	return dirs // in the core's module zip, the core alone
}

// Every module's directory holds the repository's LICENSE, word for word:
// the zip the module proxy serves for a nested module holds only that
// module's subtree, so a licence only at the root would not reach its users.
func TestEveryModuleHasLicense(t *testing.T) {
	root, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatalf("the repository has no LICENSE: %v", err)
	}
	if !bytes.HasPrefix(root, []byte("MIT License\n")) {
		t.Errorf("LICENSE does not start with the MIT License's title")
	}
	for _, dir := range modules(t) {
		got, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
		switch {
		case err != nil:
			t.Errorf("module %s has no LICENSE: %v", dir, err)
		case !bytes.Equal(got, root):
			t.Errorf("module %s has a LICENSE that differs from the root's", dir)
		}
	}
}
