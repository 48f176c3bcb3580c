package supervisor

import (
	"bufio"
	"strconv"
	"strings"
	"syscall"

	"github.com/electd/electd/supervisor/internal/nsinit"
)

// The namespace init (containment modes pidns and userns) is package
// nsinit: StartChild re-executes this binary as it, and nsinit's own init
// function, which runs before those of electd's larger dependencies, takes
// over. What it does and the protocol on its pipes are in nsinit's doc.
const (
	initArg0       = nsinit.Arg0
	initArg0Userns = nsinit.Arg0Userns
	selfExe        = nsinit.SelfExe
)

// initStatus is what the init reported on its status pipe.
type initStatus struct {
	ready   bool // waiting for the go message
	started bool
	failed  string // why the command did not start
	late    bool   // not started: the start-by moment had passed
	exited  bool
	code    int
	signal  syscall.Signal
	// empty: when the command exited, nothing else was left of the
	// namespace (nsinit's alone), and the init had closed its stdio.
	empty bool
}

// readInitStatus reads status lines until the first one that settles a
// step (ready, started or failed), or, with toExit, until the command's
// exit or the pipe's end.
func readInitStatus(r *bufio.Reader, st *initStatus, toExit bool) error {
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
			switch word {
			case "ready":
				st.ready = true
			case "started":
				st.started = true
			case "failed":
				st.failed = rest
			case "late":
				st.failed, st.late = rest, true
			case "exited":
				f := strings.Fields(rest)
				if len(f) == 2 || len(f) == 3 && f[2] == "empty" {
					code, err1 := strconv.Atoi(f[0])
					sig, err2 := strconv.Atoi(f[1])
					if err1 == nil && err2 == nil {
						st.exited, st.code, st.signal = true, code, syscall.Signal(sig)
						st.empty = len(f) == 3
					}
				}
			}
			if toExit && st.exited || !toExit && (st.ready || st.started || st.failed != "") {
				return nil
			}
		}
		if err != nil {
			return err
		}
	}
}
