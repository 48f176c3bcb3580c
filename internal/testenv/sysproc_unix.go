//go:build unix && !linux

package testenv

import "syscall"

// sysProcAttr has no Pdeathsig outside Linux: a server outlives a test binary
// that is killed with SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
