// Package testenv starts real store servers (etcd, redis-server, Redis
// Sentinel and Cluster topologies of them, and a kube-apiserver backed by
// its own etcd) for tests, as child processes on free loopback ports, and
// stops them in t.Cleanup.
//
// Binaries: etcd comes from $ELECTD_ETCD_BIN, else <module root>/bin/etcd,
// else etcd in PATH; kube-apiserver (StartKube) from
// $ELECTD_KUBE_APISERVER_BIN, else <module root>/bin/kube-apiserver, else
// PATH (`make kube-apiserver` builds it from test/servers/kube-apiserver, a
// module of its own); redis-server from $ELECTD_REDIS_SERVER, else PATH (it
// also runs the sentinels of StartRedisSentinel); redis-cli, which
// StartRedisCluster runs once to create the cluster, from
// $ELECTD_REDIS_CLI, else PATH. When one is missing the test is skipped
// with a loud message, or fails if $CI is set. A variable that names a
// missing file always fails the test.
//
// StartKube's apiserver serves HTTPS with a certificate of a test CA,
// authenticates static and ServiceAccount bearer tokens and authorizes with
// RBAC: AdminToken is in group system:masters, LeaseServiceAccount gives a
// token that may touch leases in one namespace and nothing else, and
// Kubeconfig writes the file that $KUBECONFIG names.
//
// Each server runs in its own process group and dies with the test binary
// (internal/deathsig: Pdeathsig=SIGKILL on Linux), and is SIGKILLed and
// reaped in t.Cleanup. Its output goes to a log file in a temporary directory; when the
// test has failed, the tail of that log is printed at cleanup.
//
// Start, Restart, the Start* constructors and Kube's clients and
// LeaseServiceAccount call t.Fatalf and so must run on the test goroutine;
// Stop and Kill report with t.Errorf and may be called from any goroutine.
// The package is Unix-only.
package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago (see
// freePort). Another process may take it meanwhile.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return port
}

// freePort returns a port that was free a moment ago, chosen at random
// below the kernel's ephemeral range (net.ipv4.ip_local_port_range). The
// kernel never gives a port there to an outgoing connection's source or to
// a listen on port 0, which the tests (and a second run of them on the same
// host) do all the time: so a server that restarts on its own port, as an
// etcd member does, finds it free again, unless another test drew the same
// port meanwhile (one chance in thousands), where a port of the ephemeral
// range was often taken.
func freePort() (int, error) {
	lo, hi := portPool()
	for range 100 {
		port := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		if err := ln.Close(); err != nil {
			return 0, fmt.Errorf("find free port: close listener: %w", err)
		}
		return port, nil
	}
	return 0, fmt.Errorf("find free port: 100 random ports in [%d, %d) were all in use", lo, hi)
}

// portPool is the range freePort draws from: the 16384 ports below the
// ephemeral range, or, where that range starts too low to leave them, the
// ports above it.
func portPool() (lo, hi int) {
	elo, ehi, err := ephemeralRange()
	if err != nil {
		elo, ehi = 32768, 60999 // Linux's default
	}
	const size = 16384
	if elo-size >= 1024 {
		return elo - size, elo
	}
	if ehi+1+size <= 65536 {
		return ehi + 1, ehi + 1 + size
	}
	return 1024, 65536 // no room outside it: anywhere
}

// ephemeralRange is the kernel's range of ports for outgoing connections
// and listens on port 0 (net.ipv4.ip_local_port_range), both ends included.
func ephemeralRange() (lo, hi int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, fmt.Errorf("ephemeral port range: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ephemeral port range: %q is not two numbers", b)
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("ephemeral port range %q: %w", b, err)
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("ephemeral port range %q: its start is above its end", b)
	}
	return lo, hi, nil
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	seen := make(map[int]bool, n)
	ports := make([]int, 0, n)
	for len(ports) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// ModuleRoot returns the directory of the nearest go.mod at or above the
// current working directory.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !st.IsDir() {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("find module root: no go.mod in %s or above", wd)
		}
	}
}

// binary locates a server binary: the file named by $envVar if set, else the
// first candidate path that exists, else name in PATH. When nothing is found
// it fails or skips the test (see missing).
func binary(t testing.TB, envVar, name string, candidates []string, how string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("testenv: $%s=%q: %v\n%s", envVar, p, err, how)
		}
		return p
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c
		}
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if !errors.Is(err, exec.ErrNotFound) {
		t.Logf("testenv: look up %s: %v", name, err)
	}
	missing(t, name, envVar, how)
	return ""
}

// missing fails the test under CI, else skips it, loudly saying how to get name.
func missing(t testing.TB, name, envVar, how string) {
	t.Helper()
	msg := fmt.Sprintf("%s not found (set $%s, or install it: %s)", name, envVar, how)
	if os.Getenv("CI") != "" {
		t.Fatalf("testenv: %s; $CI is set, so this is a failure", msg)
	}
	t.Skipf("\n"+
		"************************************************************\n"+
		"*** SKIPPED: %s\n"+
		"************************************************************", msg)
}
