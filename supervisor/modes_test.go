package supervisor

import (
	"os"
	"testing"
)

// The containment modes the tests of the child's tree run under, and the
// one runner of a test in each of them.

// modes are all the containment modes with a tree to contain.
var modes = []Containment{ContainPidns, ContainUserns, ContainPgroup}

// nsModes are the modes that run the child under the namespace init.
var nsModes = []Containment{ContainPidns, ContainUserns}

// forModes runs test once in each mode of in, as a subtest named for the
// mode, each skipped where this host does not allow its mode (needMode).
func forModes(t *testing.T, in []Containment, test func(t *testing.T, mode Containment)) {
	t.Helper()
	for _, mode := range in {
		t.Run(string(mode), func(t *testing.T) {
			needMode(t, mode)
			test(t, mode)
		})
	}
}

// needMode skips a test of a containment mode this host does not allow
// (pidns needs CAP_SYS_ADMIN, userns unprivileged user namespaces); with CI
// set it fails instead, since CI runs as root, and so does a mode other
// than pidns in the tests re-run as nobody (TestUsernsAsNonRoot).
func needMode(t *testing.T, mode Containment) {
	t.Helper()
	if _, _, err := ResolveContainment(mode); err != nil {
		if os.Getenv("CI") != "" || (os.Getenv(envAsNobody) != "" && mode != ContainPidns) {
			t.Fatalf("containment %s is needed here: %v", mode, err)
		}
		t.Skipf("SKIP: containment %s is not available: %v", mode, err)
	}
}
