package supervisor

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/electd/electd/elector"
)

// Containment is how the child's whole process tree is kept together, so
// that no process of it outlives the term. "The child" means every process
// it started, including those that left its process group (setsid, a
// daemonising double fork).
//
// In every mode electd stops the whole tree before a term's end is acted on
// (resign, restart, a recorded run, electd's exit), and the stop signal and
// SIGKILL reach every process of the tree, not just the main one. The modes
// differ in what happens when electd itself dies:
//
//   - pidns: the child runs in a PID namespace of its own (not as its PID 1),
//     under a small init of electd's (this binary, re-executed; see nsinit.go). The
//     kernel kills every process of a namespace when its init exits, and the
//     init dies with electd (Pdeathsig, and its control pipe closing), so the
//     tree dies with electd even on kill -9. When the main process exits, the
//     init exits with its status and the rest of the tree is SIGKILLed by the
//     kernel before electd sees the exit. Needs CAP_SYS_ADMIN.
//   - userns: as pidns, under the same init, but the PID namespace is
//     owned by a new user namespace in which electd's effective uid and gid
//     map to themselves (setgroups denied, as the kernel requires of an
//     unprivileged writer of gid_map). Any user may create one where the
//     host allows unprivileged user namespaces, and the tree dies with
//     electd on kill -9 exactly as under pidns. What changes for the child
//     (TestUsernsChildView): it keeps its uid and gid, but files and
//     processes of any other id (root's included) show as 65534 (nobody,
//     nogroup), and so do its supplementary groups (which still grant
//     access, and cannot be changed); set-user-ID and set-group-ID programs
//     run without their privilege; a file capability (ping's cap_net_raw)
//     is granted only in the user namespace, which owns no network
//     namespace, so it gains nothing either. As root (asked for), the
//     child keeps uid 0 but only the user namespace's capabilities. Needs
//     no capability; is refused where user.max_user_namespaces=0,
//     kernel.unprivileged_userns_clone=0, an AppArmor restriction or a
//     seccomp profile blocks CLONE_NEWUSER.
//   - pgroup: the child leads a process group, and electd is a child
//     subreaper: orphaned descendants are reparented to it. A stop signals
//     the group and every descendant electd can find in /proc (descendants of
//     the main process, and orphans reparented to electd that started after
//     it, with their descendants; see treeMembers), and SIGKILLs them until
//     none is left. Limits: after kill -9 of electd only the direct child
//     dies (Pdeathsig), the rest of the tree lives on, reparented to PID 1;
//     electd must be a subreaper (else orphans go to init, out of reach); a
//     process of the tree that joins electd's own process group is spared;
//     and when electd is PID 1, an orphan counts only if its environment
//     holds ELECTD_FENCING_TOKEN or reads empty or unreadable, so a daemon
//     that overwrites its environment with a process title escapes there.
//   - cgroup: a cgroup v2 leaf with cgroup.kill. Not built in this release:
//     it does not survive kill -9 of electd either (nothing is left to write
//     cgroup.kill), and pidns already contains every descendant.
type Containment string

// Containment modes, strongest first.
const (
	ContainAuto   Containment = "auto"
	ContainPidns  Containment = "pidns"
	ContainUserns Containment = "userns"
	ContainCgroup Containment = "cgroup"
	ContainPgroup Containment = "pgroup"
	// ContainNone is reported when there is no command to contain
	// (readiness-only mode); it cannot be asked for.
	ContainNone Containment = "none"
)

// ParseContainment checks a --containment value.
func ParseContainment(s string) (Containment, error) {
	switch c := Containment(s); c {
	case ContainAuto, ContainPidns, ContainUserns, ContainCgroup, ContainPgroup:
		return c, nil
	case "":
		return ContainAuto, nil
	}
	return "", elector.Configf("containment", "%q is not one of auto, pidns, userns, cgroup, pgroup", s)
}

// ResolveContainment turns the mode asked for into the one in force: auto
// becomes the strongest mode this host allows (pidns, else userns, else
// pgroup). It tries each namespace mode for real (one short-lived init), so
// the answer is what StartChild will get. The reason says why the mode was
// chosen; the error, an *elector.ConfigError for "containment", why the one
// asked for cannot be had and what would work. Each probe runs at most once
// per process.
func ResolveContainment(want Containment) (mode Containment, reason string, err error) {
	return resolve(want, hostProbes)
}

// probes tells whether this host can give each namespace mode: nil, or why
// not.
type probes struct {
	pidns, userns func() error
}

var hostProbes = probes{
	pidns:  onceErr(probePidns),
	userns: onceErr(probeUserns),
}

// onceErr runs probe at most once and remembers its answer.
func onceErr(probe func() error) func() error {
	var (
		once sync.Once
		err  error
	)
	return func() error {
		once.Do(func() { err = probe() })
		return err
	}
}

func resolve(want Containment, p probes) (Containment, string, error) {
	switch want {
	case "", ContainAuto:
		return resolveAuto(p), autoReason(p), nil
	case ContainPgroup:
		return ContainPgroup, "asked for", nil
	case ContainCgroup:
		return "", "", notAvailable(want, "cgroup containment is not built in this release; "+
			"use --containment pidns or userns (contain every descendant and survive kill -9 of electd) or pgroup")
	case ContainPidns:
		if err := p.pidns(); err != nil {
			return "", "", notAvailable(want, err.Error()+"; run electd as root or with CAP_SYS_ADMIN, or use "+
				fallback(p.userns() == nil))
		}
		return ContainPidns, "asked for", nil
	case ContainUserns:
		if err := p.userns(); err != nil {
			return "", "", notAvailable(want, err.Error()+"; allow unprivileged user namespaces, or use "+
				"--containment pidns (as root or with CAP_SYS_ADMIN) or pgroup (weaker: the tree survives a kill -9 of electd)")
		}
		return ContainUserns, "asked for", nil
	}
	return "", "", elector.Configf("containment", "%q is not a mode", want)
}

// resolveAuto is the strongest mode p allows.
func resolveAuto(p probes) Containment {
	switch {
	case p.pidns() == nil:
		return ContainPidns
	case p.userns() == nil:
		return ContainUserns
	}
	return ContainPgroup
}

// autoReason says why auto chose what resolveAuto chose.
func autoReason(p probes) string {
	if p.pidns() == nil {
		return "strongest available"
	}
	why := "pidns not available: " + p.pidns().Error()
	if p.userns() == nil {
		return why
	}
	return why + "; userns not available: " + p.userns().Error()
}

// fallback names the modes to use instead of pidns.
func fallback(userns bool) string {
	if userns {
		return "--containment userns (this host allows it: the tree dies with electd as under pidns) or pgroup"
	}
	return "--containment pgroup (weaker: the tree survives a kill -9 of electd; userns is not available either)"
}

func notAvailable(mode Containment, why string) error {
	return elector.Configf("containment", "%s is not available: %s", mode, why)
}

// probePidns starts the init in a new PID namespace, in probe mode, and
// reports why it could not.
func probePidns() error {
	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	nsAttr(sys, ContainPidns)
	if err := probeInit(sys); err != nil {
		if errors.Is(err, syscall.EPERM) {
			return errors.New("creating a PID namespace was refused (no CAP_SYS_ADMIN)")
		}
		return fmt.Errorf("creating a PID namespace: %w", err)
	}
	return nil
}

// probeUserns starts the init in a new PID namespace owned by a new user
// namespace, maps its ids as StartChild does, and reports why it could not.
func probeUserns() error {
	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	nsAttr(sys, ContainUserns)
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating a user namespace: %w", err)
	}
	defer ctlW.Close()
	attr := &os.ProcAttr{Files: []*os.File{nil, nil, nil, ctlR}, Env: []string{}, Sys: sys}
	err = runProbe(initArg0Userns, attr, func(pid int) error {
		ctlR.Close()
		if err := writeIDMaps(pid); err != nil {
			return err
		}
		_, err := ctlW.Write([]byte{0})
		return err
	})
	ctlR.Close()
	if err != nil {
		return fmt.Errorf("creating a user namespace: %w%s", err, usernsBlocker(err))
	}
	return nil
}

// probeInit runs the init in probe mode with sys and waits for it.
func probeInit(sys *syscall.SysProcAttr) error {
	attr := &os.ProcAttr{Files: []*os.File{nil, nil, nil}, Env: []string{}, Sys: sys}
	return runProbe(initArg0, attr, nil)
}

// runProbe starts the init as argv0 in probe mode, calls started (if not
// nil; an error kills the init) and waits for the init's verdict.
func runProbe(argv0 string, attr *os.ProcAttr, started func(pid int) error) error {
	p, err := startOwned(selfExe, []string{argv0}, attr)
	if err != nil {
		return err
	}
	var serr error
	if started != nil {
		if serr = started(p.Pid); serr != nil {
			_ = p.Kill()
		}
	}
	st, err := p.Wait()
	disown(p.Pid)
	switch {
	case serr != nil:
		return serr
	case err != nil:
		return fmt.Errorf("wait for the namespace init: %w", err)
	case !st.Success():
		return fmt.Errorf("the namespace init failed its probe (%s)", st)
	}
	return nil
}

// nsAttr sets up sys for the namespaces of mode: a new PID namespace, and
// for userns a new user namespace that owns it. Its id maps are written
// by writeIDMaps once the init has been exec'd, not by the fork: electd is
// not dumpable (cmd/electd's hideProcess), so the /proc files of a forked
// copy of it belong to root until it execs, and a non-root electd could not
// write them.
func nsAttr(sys *syscall.SysProcAttr, mode Containment) {
	sys.Cloneflags |= syscall.CLONE_NEWPID
	if mode == ContainUserns {
		sys.Cloneflags |= syscall.CLONE_NEWUSER
	}
}

// writeIDMaps maps, in the user namespace of the init pid, electd's
// effective uid and gid to themselves: an unprivileged process may map only
// those, and the gid only once setgroups is denied.
func writeIDMaps(pid int) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	uid, gid := strconv.Itoa(os.Geteuid()), strconv.Itoa(os.Getegid())
	for _, m := range []struct{ file, line string }{
		{"setgroups", "deny"},
		{"gid_map", gid + " " + gid + " 1\n"},
		{"uid_map", uid + " " + uid + " 1\n"},
	} {
		if err := writeProcFile(dir+m.file, m.line); err != nil {
			return fmt.Errorf("write the user namespace's %s: %w", m.file, err)
		}
	}
	return nil
}

// writeProcFile writes s to an existing /proc file in one write, as the
// id map files require.
func writeProcFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// usernsBlocker names, from the host's settings, what may have refused a
// user namespace: err's errno and the sysctls that disable them.
func usernsBlocker(err error) string {
	var hints []string
	if sysctlIs("user.max_user_namespaces", "0") {
		hints = append(hints, "sysctl user.max_user_namespaces=0")
	}
	if sysctlIs("kernel.unprivileged_userns_clone", "0") {
		hints = append(hints, "sysctl kernel.unprivileged_userns_clone=0")
	}
	if sysctlIs("kernel.apparmor_restrict_unprivileged_userns", "1") {
		hints = append(hints, "sysctl kernel.apparmor_restrict_unprivileged_userns=1 (an AppArmor restriction)")
	}
	switch {
	case len(hints) > 0:
		return " (unprivileged user namespaces are disabled here: " + strings.Join(hints, ", ") + ")"
	case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES):
		return " (refused: a seccomp or AppArmor/SELinux profile, e.g. a container runtime's default, " +
			"may block CLONE_NEWUSER)"
	case errors.Is(err, syscall.ENOSPC):
		return " (the user.max_user_namespaces limit is reached)"
	case errors.Is(err, syscall.EINVAL):
		return " (this kernel has no user namespaces)"
	}
	return ""
}

// treeMembers lists, from /proc, the live processes of the tree of the
// child leader (pid, started at start in clock ticks since boot; 0: not
// known), other than leader itself: its process group, its descendants,
// and the orphans that were reparented to this process (a subreaper) with
// their descendants.
//
// An orphan reparented to electd counts when it started at or after the
// leader, is not a child electd forked itself (owned), and is not in
// electd's own process group. Unless strangers can be orphaned to electd
// (see orphanRule), that is every orphan of the tree, whatever it did to its
// argv or environment: a subreaper inherits only orphans of its own
// descendants, electd forks no process but the child (and, before any
// child, the pidns probe, which is owned; and hooks, see StartAside), and a process that other code of
// this binary might start without StartChild stays in electd's group, as do
// its orphans unless they leave it. (A process of the tree that
// deliberately joins electd's group is spared, as is every process of a
// group that StartAside made, a hook's.)
//
// When strangers can be orphaned to electd (it is PID 1 of a container, or
// it inherited children at start), it must not kill them (a `kubectl exec`
// session's background job, the daemon of a log agent started before
// electd): then an orphan counts only if its environment holds the leader's
// mark (marker, e.g. its ELECTD_FENCING_TOKEN=… entry), or cannot be read
// or keeps reading empty (a process in the middle of an exec, or not
// dumpable): see marked. A process of the tree that overwrites its
// environment (a process title) escapes this rule.
//
// The leader's own pid and group count only while a process with that pid
// is the leader (same start time), so that a reused pid pulls in no one. A
// zombie whose other threads still run is alive (see running).
//
// groups are process groups of the tree, other than leader's own and
// electd's: those of the leader's descendants and group, and of orphans
// known to be the tree's (every orphan under the every-orphan rule, or one
// whose environment holds the mark), with their descendants; zombies
// included. A process that keeps forking a successor and exiting is never
// listed alive (by the time a scan reads it, it is a zombie, and its
// successor was not in the listing), but a signal to its group reaches the
// whole chain at once. An orphan counted only because its environment could
// not be read or read empty (a zombie's does) is signalled itself, but its
// group is not: it may be a stranger's, whose other members are strangers.
//
// groupGone says that leader's group was seen empty after the leader was
// reaped: its id may since belong to a stranger, so it pulls in no one.
//
// lingering counts the tree's zombies that are electd's own (orphans
// reparented to it, which it reaps): such a zombie may have forked a
// successor after the listing, which the scan did not see and which is
// reparented to electd, in a group of its own if it left the zombie's
// (a chain that forks, changes group and exits over and over). A scan
// that finds one proves nothing; the next, once it is reaped, sees what
// it left.
//
// No orphan is reaped while a scan runs (it holds reaperMu): a process that
// was listed is still there, alive or a zombie, when its stat is read, so a
// chain of processes that each start a successor and exit cannot slip
// between the listing and the reading. The error says /proc could not be
// listed: then nothing is known, and the caller must not take it as empty.
func treeMembers(leader int, start uint64, marker string, groupGone bool) (pids, groups []int, lingering int, err error) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	procs, err := listProcs()
	if err != nil {
		return nil, nil, 0, err
	}
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	self, ownGroup := os.Getpid(), syscall.Getpgrp()
	in := map[int]bool{} // pid → its group may be signalled
	var walk func(pid int, trusted bool)
	walk = func(pid int, trusted bool) {
		if was, ok := in[pid]; ok && (was || !trusted) {
			return
		}
		in[pid] = trusted
		for _, c := range children[pid] {
			walk(c, trusted)
		}
	}
	lp, leaderLives := procs[leader]
	leaderReused := leaderLives && start != 0 && lp.start != start
	if leaderLives && !leaderReused {
		walk(leader, true)
	}
	var orphans []int
	for pid, p := range procs {
		switch {
		case p.pgrp == leader && !leaderReused && !groupGone:
			walk(pid, true)
		case p.ppid == self && p.start >= start && p.pgrp != ownGroup && !ownedLocked(pid) && !asideLocked(p.pgrp):
			orphans = append(orphans, pid)
		}
	}
	if orphanRule.strangers == "" {
		for _, pid := range orphans {
			walk(pid, true)
		}
	} else {
		sure, maybe := marked(orphans, marker)
		for _, pid := range sure {
			walk(pid, true)
		}
		for _, pid := range maybe {
			walk(pid, false)
		}
	}
	seen := map[int]bool{leader: true, ownGroup: true, 0: true}
	for pid, trusted := range in {
		p, ok := procs[pid]
		if !ok {
			continue
		}
		if trusted && !seen[p.pgrp] {
			seen[p.pgrp] = true
			groups = append(groups, p.pgrp)
		}
		switch {
		case pid == leader:
		case running(pid, p):
			pids = append(pids, pid)
		case p.ppid == self:
			lingering++
		}
	}
	return pids, groups, lingering, nil
}

// orphanRule is how the pgroup sweep tells the child's orphans from
// strangers, decided once at start, before electd forks anything.
var orphanRule = orphanRuleAtStart()

// sweepRule says whether processes that are not the child's can be orphaned
// to electd, and so whether the sweep must look for the child's mark.
type sweepRule struct {
	// strangers is why they can (empty: they cannot): electd runs as PID 1
	// of its PID namespace, where every orphan is reparented to it; or it
	// inherited children from the process that exec'd it (`agent & exec
	// electd …`), whose own orphans come to electd as a subreaper, and
	// whose lineage is lost once they are orphaned.
	strangers string
}

func orphanRuleAtStart() sweepRule {
	if os.Getpid() == 1 {
		return sweepRule{strangers: "electd runs as PID 1 of its PID namespace"}
	}
	pids, err := childPids()
	switch {
	case err != nil:
		return sweepRule{strangers: fmt.Sprintf("electd could not list the children it inherited (%v)", err)}
	case len(pids) > 0:
		return sweepRule{strangers: fmt.Sprintf("electd inherited %d child process(es) (pids %v) from the process that started it", len(pids), pids)}
	}
	return sweepRule{}
}

// marked sorts orphans by the environment entry marker that marks the
// tree: sure, whose environment holds marker; maybe, whose environment
// cannot be read, or still reads empty after markReads reads markPause
// apart (one pause for all of them). The rest, whose environment was read
// whole without marker, are not the tree's. A process reads empty in the
// middle of an exec (the new image's environment is not in place yet;
// hence the reads again, which spare a stranger that was execing), when it
// is a zombie, and when started with none at all (env -i); it is unreadable
// when not dumpable or not ours to read. A zombie leader (main thread
// exited) has no memory of its own left; its live threads do, and are read
// too.
func marked(orphans []int, marker string) (sure, maybe []int) {
	if marker == "" {
		return nil, nil
	}
	for i := 0; i < markReads && len(orphans) > 0; i++ {
		if i > 0 {
			time.Sleep(markPause)
		}
		var empty []int
		for _, pid := range orphans {
			switch env, ok := readEnviron(pid); {
			case !ok:
				maybe = append(maybe, pid)
			case len(env) == 0:
				empty = append(empty, pid)
			case hasEntry(env, marker):
				sure = append(sure, pid)
			}
		}
		orphans = empty
	}
	return sure, append(maybe, orphans...)
}

// hasEntry reports whether the NUL-separated environment env holds kv.
func hasEntry(env []byte, kv string) bool {
	for _, e := range strings.Split(string(env), "\x00") {
		if e == kv {
			return true
		}
	}
	return false
}

const (
	markReads = 3
	markPause = 5 * time.Millisecond
)

// treeMarker is the entry of env that marks the processes of one child's
// tree: its fencing token, which only this term's child carries.
func treeMarker(env []string) string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "ELECTD_FENCING_TOKEN=") {
			return kv
		}
	}
	return ""
}
