package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneReaderOfProc: proc.go is the package's one reader of /proc; the
// other files ask it. Allowed elsewhere: the path of this binary, which a
// namespace init re-executes (nsinit.go), and the writes of a user
// namespace's id maps (contain.go's writeIDMaps).
func TestOneReaderOfProc(t *testing.T) {
	allowed := map[string]int{"nsinit.go": 1, "contain.go": 1}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == "proc.go" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "//")
			if strings.Contains(code, `"/proc`) {
				n++
			}
		}
		if n > allowed[f] {
			t.Errorf("%s names /proc in %d lines of code (allowed %d): read it through proc.go", f, n, allowed[f])
		}
	}
}
