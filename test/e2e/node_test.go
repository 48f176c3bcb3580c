package e2e

import (
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
	store string   // --store URL; empty: none (env must carry ELECTD_STORE)
	args  []string // more flags before `--`
	env   []string // more environment (RECORD_* knobs, ELECTD_*)
	// pidNamespace runs electd as PID 1 of a new PID namespace, as in a
	// container whose entrypoint it is (needs root).
	pidNamespace bool
	// sys is the start's process attributes (a kit.Link's); nil: none.
	sys *syscall.SysProcAttr
}

// through returns the options of a node that reaches the store over link.
func through(link *kit.Link) nodeOpts {
	return nodeOpts{store: link.URL, sys: link.SysProcAttr}
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
	if o.store != "" {
		args = append(args, "--store", o.store)
	}
	args = append(append(args, o.args...), "--", bin.Recorder)
	spec := h.Spec(id, args, o.env)
	if o.sys != nil {
		attr := *o.sys
		spec.SysProcAttr = &attr
	}
	if o.pidNamespace {
		if spec.SysProcAttr == nil {
			spec.SysProcAttr = &syscall.SysProcAttr{}
		}
		spec.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
	}
	return bin.StartLive(h.T, spec)
}
