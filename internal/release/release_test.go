package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCopiesAgree: the files that are not Go repeat the production build;
// each must say what this package says.
func TestCopiesAgree(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{name: "Dockerfile", file: "Dockerfile", want: []string{"CGO_ENABLED=0", "go build -trimpath -tags " + Tags + " ", `-ldflags "` + LDFlags + " "}},
		{name: "Makefile release", file: "Makefile", want: []string{"CGO_ENABLED=0 $(GO) build -trimpath -tags " + Tags + " ", `-ldflags "` + LDFlags + " "}},
		{name: "README", file: "README.md", want: []string{Command("electd", "./cmd/electd")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			// One line per command: continuations joined, spaces collapsed.
			text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(b), "")
			text = regexp.MustCompile(`[ \t]+`).ReplaceAllString(text, " ")
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s does not say %q: make it build as internal/release says", tt.file, w)
				}
			}
		})
	}
}

// TestTagsLeaveOut: each tag still leaves out what it is for. A library
// that renames its tag, or starts importing the package by another path,
// would bring the pages back without a sound.
func TestTagsLeaveOut(t *testing.T) {
	if testing.Short() {
		t.Skip("lists electd's dependencies")
	}
	out, err := exec.Command("go", "list", "-deps", "-tags", Tags, "github.com/electd/electd/cmd/electd").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, gone := range []string{
		"go.etcd.io/etcd/server/v3/embed",         // noembed
		"golang.org/x/net/trace",                  // grpcnotrace
		"html/template",                           // grpcnotrace (x/net/trace's)
		"github.com/cpuguy83/go-md2man/v2/md2man", // urfave_cli_no_docs
		"github.com/russross/blackfriday/v2",      // urfave_cli_no_docs
	} {
		if slices.Contains(deps, gone) {
			t.Errorf("the production build (-tags %s) links %s", Tags, gone)
		}
	}
}
