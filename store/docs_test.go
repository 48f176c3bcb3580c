package store

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsListEveryScheme: the tables of store URLs in the README and in
// docs/OPERATIONS.md name every registered scheme, and no other.
func TestDocsListEveryScheme(t *testing.T) {
	var want []string
	for _, b := range backends {
		for _, s := range b.Schemes {
			want = append(want, s.Name)
		}
	}
	slices.Sort(want)
	for _, doc := range []string{"README.md", "docs/OPERATIONS.md"} {
		got := storeTableSchemes(t, filepath.Join("..", filepath.FromSlash(doc)))
		if !slices.Equal(got, want) {
			t.Errorf("%s's table of store URLs (### Store URLs) names the schemes %v; store/backends.go registers %v", doc, got, want)
		}
	}
}

var schemeRef = regexp.MustCompile("([a-z][a-z0-9+.-]*)://")

// storeTableSchemes are the schemes named in the first table under the
// heading "### Store URLs" of the Markdown file at path, sorted, each once.
func storeTableSchemes(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n### Store URLs\n")
	if !ok {
		t.Fatalf("%s has no heading ### Store URLs", path)
	}
	var out []string
	inTable := false
	for line := range strings.SplitSeq(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable || strings.HasPrefix(line, "#") {
				break
			}
			continue
		}
		inTable = true
		for _, m := range schemeRef.FindAllStringSubmatch(line, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out
}
