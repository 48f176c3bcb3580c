package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The one reader of /proc: what the supervisor knows of processes (their
// stat lines, environments, threads, the children of electd's threads),
// of its own signal dispositions, and of the sysctls that decide whether
// a user namespace may be made. Everything else asks these functions.
// (Writing a user namespace's id maps, a setup step, stays in contain.go.)

// procStat is what the sweep reads of a process's stat line.
type procStat struct {
	state      byte
	ppid, pgrp int
	start      uint64 // clock ticks after boot
}

// pidTaken reports whether a process with pid exists.
func pidTaken(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// readStat parses /proc/<pid>/stat: "pid (comm) state ppid pgrp ...", where
// comm may itself contain spaces and parentheses.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: short", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil {
		return procStat{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, start: parseStart(f)}, nil
}

// running reports whether a process can still run: not a zombie, or a
// zombie leader (its main thread exited) whose other threads still run.
func running(pid int, p procStat) bool {
	if p.state != 'Z' && p.state != 'X' {
		return true
	}
	states, err := taskStates(pid)
	if err != nil {
		return false
	}
	for _, st := range states {
		if st != 'Z' && st != 'X' {
			return true
		}
	}
	return false
}

// taskStates reads the state letter of each thread of pid whose stat can
// be read (a thread that exits meanwhile is left out); an error means
// pid's thread list could not be read (pid is gone).
func taskStates(pid int) ([]byte, error) {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	var states []byte
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			states = append(states, b[i+2])
		}
	}
	return states, nil
}

// readEnviron reads the environment of pid, or of its first live thread
// whose one reads non-empty (a zombie leader has none of its own). ok is
// false if no environment of it could be read.
func readEnviron(pid int) (env []byte, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	paths := []string{dir + "/environ"}
	if tasks, err := os.ReadDir(dir + "/task"); err == nil {
		for _, t := range tasks {
			paths = append(paths, dir+"/task/"+t.Name()+"/environ")
		}
	}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		ok = true
		if len(b) > 0 {
			return b, true
		}
	}
	return nil, ok
}

// listProcs reads /proc/*/stat for every process.
func listProcs() (map[int]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	procs := make(map[int]procStat, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			procs[pid] = st
		}
	}
	return procs, nil
}

// startTime is the start time of pid in clock ticks since boot, or 0.
func startTime(pid int) uint64 {
	st, err := readStat(pid)
	if err != nil {
		return 0
	}
	return st.start
}

// sysctlIs reports whether the sysctl name (dotted, as sysctl(8) names
// it) holds value.
func sysctlIs(name, value string) bool {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	return err == nil && strings.TrimSpace(string(b)) == value
}

// childPids lists the pids of this process's children, zombies included.
func childPids() ([]int, error) {
	files, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return childPidsByScan()
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EINVAL) {
				return childPidsByScan()
			}
			return nil, err
		}
		for _, w := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(w); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// childPidsByScan is the fallback for kernels without CONFIG_PROC_CHILDREN.
func childPidsByScan() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list children: %w", err)
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && st.ppid == self {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// parseStart reads field 22 (starttime) from the fields after comm.
func parseStart(f []string) uint64 {
	// f[0] is field 3 (state), so starttime (22) is f[19].
	if len(f) < 20 {
		return 0
	}
	v, err := strconv.ParseUint(strings.TrimSpace(f[19]), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
