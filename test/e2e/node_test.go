package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/electd/electd/test/kit"
)

const (
	ttl           = 2 * time.Second
	renewInterval = ttl / 5 // electd's default
	stopTimeout   = 500 * time.Millisecond
	coolDown      = 200 * time.Millisecond

	exitTimeout = 10 * time.Second // signal to exit
)

// node is one `electd run` process.
type node = kit.Electd

// nodeOpts are the per-process differences.
type nodeOpts struct {
	// dial is how it reaches the store: --store, its flags and
	// environment; a zero dial: none (env must carry ELECTD_STORE).
	dial kit.Dial
	args []string // more flags before `--`
	env  []string // more environment (RECORD_* knobs, ELECTD_*)
	// pidNamespace runs electd as PID 1 of a new PID namespace, as in a
	// container whose entrypoint it is (needs root).
	pidNamespace bool
	// sys is the start's process attributes (a kit.Link's); nil: none.
	sys *syscall.SysProcAttr
	// nobody runs electd as uid and gid 65534 without supplementary groups,
	// as a pod's non-root user (the test runs as root).
	nobody bool
	// host runs electd in a namespace that stands for a host of another
	// kind (see hostKind); "": this one.
	host hostKind
}

// hostKind is a host that electd may be run on, made by wrapping it in a
// user namespace of the test's own, mapped to the test's user (root): the
// sysctl user.max_user_namespaces is per user namespace.
type hostKind string

const (
	// noUserns: unprivileged user namespaces are disabled
	// (user.max_user_namespaces=0); electd is root there and may have a
	// PID namespace.
	noUserns hostKind = "no-userns"
	// noNamespaces: the same, and electd has no capability (as a non-root
	// user's process): neither pidns nor userns.
	noNamespaces hostKind = "no-namespaces"
)

// wrap is the command that runs electd on such a host.
func (k hostKind) wrap() []string {
	if k == "" {
		return nil
	}
	script := `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`
	if k == noNamespaces {
		script = `echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set=-all --inh-caps=-all -- "$@"`
	}
	return []string{"unshare", "--user", "--map-root-user", "sh", "-c", script, "sh"}
}

// through returns the options of a node that reaches the store over link.
func through(link *kit.Link) nodeOpts {
	return nodeOpts{dial: link.Dial, sys: link.SysProcAttr}
}

// startNode starts `electd run` with the harness's election and record log
// and waits until /livez answers 200. It is SIGKILLed at cleanup.
func (h *harness) startNode(id string, o nodeOpts) *node {
	h.T.Helper()
	n, err := h.tryStart(id, o)
	if err != nil {
		h.T.Fatalf("start %s: %v", id, err)
	}
	return n
}

// tryStart is startNode that returns the error; the process of a failed
// start is the last of h.Procs.
func (h *harness) tryStart(id string, o nodeOpts) (*node, error) {
	h.T.Helper()
	args := []string{"run", "--election", h.Name, "--id", id, "--ttl", ttl.String(),
		"--stop-timeout", stopTimeout.String(), "--cool-down", coolDown.String(),
		"--log-format", "json", "--log-level", "debug"}
	if o.dial.URL != "" {
		args = append(args, o.dial.Flags()...)
	}
	args = append(append(args, o.args...), "--", bin.Recorder)
	spec := h.Spec(id, args, slices.Concat(o.env, o.dial.Env))
	if o.sys != nil {
		attr := *o.sys
		spec.SysProcAttr = &attr
	}
	if o.nobody {
		h.shareWithNobody()
		if spec.SysProcAttr == nil {
			spec.SysProcAttr = &syscall.SysProcAttr{}
		}
		spec.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	spec.Wrap = o.host.wrap()
	if o.pidNamespace {
		if spec.SysProcAttr == nil {
			spec.SysProcAttr = &syscall.SysProcAttr{}
		}
		spec.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
	}
	return bin.StartLive(h.T, spec)
}

// nobody is the uid and gid that nodeOpts.nobody runs electd as.
const nobody = 65534

// shareWithNobody lets a node run as nobody reach the binaries, the
// scenario's directory and the record log, which its child appends to.
func (h *harness) shareWithNobody() {
	h.T.Helper()
	if os.Geteuid() != 0 {
		h.T.Skipf("SKIP: running electd as nobody needs root (euid %d)", os.Geteuid())
	}
	for _, dir := range []string{bin.Dir, filepath.Dir(h.Dir), h.Dir} {
		if err := os.Chmod(dir, 0o755); err != nil {
			h.T.Fatal(err)
		}
	}
	f, err := os.OpenFile(h.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err == nil {
		f.Close()
		err = os.Chmod(h.LogPath, 0o666)
	}
	if err != nil {
		h.T.Fatal(err)
	}
}
