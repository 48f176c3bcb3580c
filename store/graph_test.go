package store

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/electd/electd"

// backendPkgs are the backend packages, which only store/ may import.
var backendPkgs = []string{module + "/elector/etcd", module + "/elector/redis", module + "/elector/redlock"}

// TestImportGraph checks the seam: no package but store/ imports a backend
// (the CLI, the demo and the benchmarks ask store/ for electors), only a
// backend's own tests import it besides, the backends import neither
// store/, the supervisor nor health, and the binary still links them.
func TestImportGraph(t *testing.T) {
	out := goList(t, "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}}|{{join .XTestImports \" \"}}", module+"/...")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		pkg, imports, tests := f[0], strings.Fields(f[1]), append(strings.Fields(f[2]), strings.Fields(f[3])...)
		for _, b := range backendPkgs {
			if slices.Contains(imports, b) && pkg != module+"/store" {
				t.Errorf("%s imports %s: only store/ may; ask store.Open for electors", pkg, b)
			}
			if slices.Contains(tests, b) && pkg != b && pkg != module+"/store" {
				t.Errorf("the tests of %s import %s: only the backend's own tests and store/'s may", pkg, b)
			}
		}
		if slices.Contains(backendPkgs, pkg) {
			for _, up := range []string{"/store", "/supervisor", "/health", "/cmd/electd"} {
				if slices.Contains(imports, module+up) {
					t.Errorf("backend %s imports %s: dependencies point down to elector/", pkg, module+up)
				}
			}
		}
	}
	deps := strings.Fields(goList(t, "-deps", module+"/cmd/electd"))
	for _, b := range backendPkgs {
		if !slices.Contains(deps, b) {
			t.Errorf("electd no longer links %s", b)
		}
	}
}

// TestSupervisorLinksLittle: the supervisor's PID-namespace init is electd
// re-executed, and it starts once the supervisor package's init runs, after
// every package ordered before it; a contract package that pulled in net or
// crypto/tls would have electd initialise grpc and TLS first, and every
// child start would wait for them (measured: 13 ms instead of 10 ms).
func TestSupervisorLinksLittle(t *testing.T) {
	deps := strings.Fields(goList(t, "-deps", module+"/supervisor"))
	for _, heavy := range []string{"net", "crypto/tls", "net/http"} {
		if slices.Contains(deps, heavy) {
			t.Errorf("the supervisor now depends on %s: keep it (and elector/, clock/) free of the network", heavy)
		}
	}
}

// TestElectdLinksTwoKubeAPIGroups: elector/kube's client knows the two API
// groups it calls. client-go's typed clients (k8s.io/client-go/kubernetes/...)
// import its scheme of every built-in group (56 packages of k8s.io/api):
// with them the production build (-tags noembed) was 72.6 MB instead of
// 44.8, and `electd --version` took about 1.5 times as long.
func TestElectdLinksTwoKubeAPIGroups(t *testing.T) {
	allowed := []string{"k8s.io/api/coordination/v1", "k8s.io/api/authorization/v1"}
	for _, tags := range []string{"", "noembed"} {
		for _, dep := range strings.Fields(goList(t, "-deps", "-tags", tags, module+"/cmd/electd")) {
			switch {
			case strings.HasPrefix(dep, "k8s.io/api/") && !slices.Contains(allowed, dep):
				t.Errorf("electd (tags %q) links %s: elector/kube's client registers %s only", tags, dep, strings.Join(allowed, " and "))
			case strings.HasPrefix(dep, "k8s.io/client-go/kubernetes"):
				t.Errorf("electd (tags %q) links %s, which brings client-go's scheme of every API group; elector/kube has a client of its own (client.go)", tags, dep)
			}
		}
	}
}

// maxCLILines bounds cmd/electd without its tests: the CLI reads flags
// and wires packages; what grows beyond this belongs in a package.
const maxCLILines = 1800

func TestCLISize(t *testing.T) {
	dir := strings.TrimSpace(goList(t, "-f", "{{.Dir}}", module+"/cmd/electd"))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			n++
		}
		total += n
	}
	t.Logf("cmd/electd: %d lines without tests", total)
	if total > maxCLILines {
		t.Errorf("cmd/electd has %d lines without tests, more than %d: move what is not flags and wiring into a package", total, maxCLILines)
	}
}

func goList(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
