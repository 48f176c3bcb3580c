package supervisor

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// layers gives each non-test file of the package its layer (see doc.go's
// diagram): a file may use what its own layer and the layers below it
// define, never what a higher layer defines. Every non-test file must be
// listed.
var layers = map[string]int{
	"doc.go":  0,
	"proc.go": 0,
	"reap.go": 1, "aside.go": 1, "nsinit.go": 1, "stopby.go": 1,
	"contain.go":    2,
	"child.go":      3,
	"child_stop.go": 4,
	"child_init.go": 5,
	"tree.go":       6,
	"signal.go":     7,
	"config.go":     8,
	"supervisor.go": 9,
	"cooldown.go":   10, "switchover.go": 10,
	"start.go": 11,
	"term.go":  12,
	"loop.go":  13, "once.go": 13,
}

// backReference is a use, in file from, of name, which file to defines
// in a higher layer.
type backReference struct{ from, name, to string }

// backReferences type-checks the package's non-test files and lists every
// use of a package-level name, method or field defined in a higher layer.
func backReferences(t *testing.T) []backReference {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		if _, ok := layers[n]; !ok {
			t.Errorf("%s has no layer: give it one in layering_test.go and doc.go", n)
		}
		abs, err := filepath.Abs(n)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, abs, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("github.com/electd/electd/supervisor", fset, files, info)
	if err != nil {
		t.Fatalf("type-check the package: %v", err)
	}
	seen := map[backReference]bool{}
	var back []backReference
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if v, ok := obj.(*types.Var); ok && !v.IsField() && obj.Parent() != pkg.Scope() {
			continue // a local
		}
		if obj.Parent() != nil && obj.Parent() != pkg.Scope() && obj.Parent() != types.Universe {
			continue // a local type or constant
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if layers[to] <= layers[from] {
			continue
		}
		r := backReference{from, obj.Name(), to}
		if !seen[r] {
			seen[r] = true
			back = append(back, r)
		}
	}
	sort.Slice(back, func(i, j int) bool {
		return fmt.Sprint(back[i]) < fmt.Sprint(back[j])
	})
	return back
}

// TestLayering: the package's files depend one way, down the layers of
// doc.go. ELECTD_LAYERING_VERBOSE=1 lists the back references even when the
// test passes (to count them while moving code).
func TestLayering(t *testing.T) {
	back := backReferences(t)
	for _, r := range back {
		t.Errorf("%s (layer %d) uses %s of %s (layer %d): move one of them so that the lower file does not depend on the higher",
			r.from, layers[r.from], r.name, r.to, layers[r.to])
	}
	if os.Getenv("ELECTD_LAYERING_VERBOSE") != "" {
		t.Logf("%d back references", len(back))
	}
}
