//go:build !linux

package deathsig

import "syscall"

// setDeathsig does nothing: only Linux has Pdeathsig.
func setDeathsig(*syscall.SysProcAttr) {}
