// Package supervisor runs the leadership loop (campaign, run the child
// while leading, stop it before the term's deadline, resign) and holds the
// child's whole process tree together (see Containment).
//
// Its files depend one way: a file uses only what its own layer and the
// layers below it define (TestLayering checks it), from the bottom up:
//
//	13  loop.go (Run)            once.go (RunOnce)
//	12  term.go (hold: one term of the child)
//	11  start.go (the term's child: start, prepare ahead, gone)
//	10  cooldown.go (Backoff, coolDown)  switchover.go (give, ResignTo)
//	 9  supervisor.go (Supervisor, New, its state and accessors)
//	 8  config.go (Config, validation, ExitError)
//	 7  signal.go (ForwardSignals)
//	 6  tree.go (treeOf chooses the mode; groupTree: pgroup; StartChild)
//	 5  child_init.go (nsTree: pidns and userns, the namespace init)
//	 4  child_stop.go (Stop and the sweep of the tree)
//	 3  child.go (Child, ChildSpec, ExitStatus, the tree interface, fork and wait)
//	 2  contain.go (containment modes, probes, treeMembers, the sweep's rule)
//	 1  reap.go, aside.go (orphans and processes beside the child), nsinit.go,
//	    stopby.go (stop-by arithmetic, stopTimer, checkTerm)
//	 0  proc.go (the one reader of /proc)
//
// The growing delay of the cool-down and of a restart in place is
// internal/backoff's (Step and Delay, without jitter).
//
// The containment mode is chosen once, when a child is made (treeOf):
// whatever differs between the modes is a method of the child's tree
// (groupTree or nsTree); nothing else looks at the mode.
package supervisor
