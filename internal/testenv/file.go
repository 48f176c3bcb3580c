package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes content to a file named name in a temporary directory
// of the test, readable by its owner only (a password file, for
// instance), and returns its path.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
