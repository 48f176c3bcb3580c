package deathsig

import "syscall"

func setDeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
