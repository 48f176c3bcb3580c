package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestChildCannotReadSecrets: a child running as electd's own non-root
// user cannot read electd's environment (ELECTD_STORE_PASSWORD,
// ELECTD_ADMIN_TOKEN) from /proc/<electd>/environ.
func TestChildCannotReadSecrets(t *testing.T) {
	store := "etcd://app@" + testenv.StartEtcd(t).Endpoint() // auth off: any password logs in
	const password, token = "store-pw-6d1e0b", "admin-token-43aa9c1f27"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "run", args: []string{"run", "--election", "dump", "--listen", "127.0.0.1:0", "--on-exit", "exit"}},
		{name: "lock", args: []string{"lock", "dump-lock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// $PPID is electd: under pgroup containment it is the shell's parent.
			child := `echo "uid=$(id -u)"; cat /proc/$PPID/environ; echo "cat-exit=$?"`
			args := append(append([]string{tc.args[0], "--store", store, "--containment", "pgroup", "--shell"}, tc.args[1:]...), "--", child)
			r := runElectdAsUser(t, 60*time.Second, []string{"ELECTD_STORE_PASSWORD=" + password, "ELECTD_ADMIN_TOKEN=" + token}, args...)
			if !strings.Contains(r.stdout, "cat-exit=") {
				t.Fatalf("the child did not run:\n%s", r)
			}
			if strings.Contains(r.stdout, "uid=0\n") {
				t.Fatalf("the child ran as root, which may read any process's environment:\n%s", r)
			}
			for _, secret := range []string{password, token} {
				if strings.Contains(r.stdout, secret) {
					t.Fatalf("the child read %q from electd's /proc/PID/environ:\n%s", secret, r)
				}
			}
			t.Logf("child: %s", strings.TrimSpace(strings.ReplaceAll(r.stdout, "\x00", " ")))
		})
	}
}

// runElectdAsUser is runElectd as a user other than root: as uid/gid
// 65534 (nobody) when the test runs as root, else as the test's own user.
// The test binary is copied where that user can run it.
func runElectdAsUser(t *testing.T, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("test binary: %v", err)
	}
	dir, err := os.MkdirTemp("", "electd-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "electd")
	copyFile(t, exe, bin, 0o755)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Args[0] = "electd"
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), asMainEnv+"=1"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Getuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	case errors.Is(err, syscall.EPERM):
		t.Skipf("SKIPPED LOUDLY: cannot run electd as a non-root user (%v); this test proves nothing here", err)
	default:
		t.Fatalf("electd %s: %v\n%s", strings.Join(args, " "), err, r)
	}
	return r
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
