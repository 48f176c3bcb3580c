package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/deathsig"
)

func TestRedis(t *testing.T) {
	r := StartRedis(t)
	if !strings.HasPrefix(r.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want 127.0.0.1:PORT", r.Addr())
	}
	cli := r.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := cli.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	if got, err := cli.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("get = %q, %v; want \"v\"", got, err)
	}

	addr, pid := r.Addr(), r.Pid()
	r.Restart(t)
	if r.Addr() != addr || r.Pid() == pid || r.Pid() == 0 {
		t.Fatalf("after restart: addr %s pid %d, want %s and a new pid (was %d)", r.Addr(), r.Pid(), addr, pid)
	}
	if got, err := cli.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("get after restart = %q, %v; want redis.Nil (empty server)", got, err)
	}

	if err := cli.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("set after restart: %v", err)
	}
	r.Kill(t)
	r.Start(t)
	if n, err := cli.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("dbsize after kill and start = %d, %v; want 0", n, err)
	}
}

func TestRedisRetriesTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	tries := 0
	r := startRedis(t, RedisOptions{}, func() (int, error) {
		tries++
		if tries == 1 {
			return taken, nil
		}
		return freePort()
	})
	if tries != 2 || r.Addr() == ln.Addr().String() {
		t.Fatalf("tries = %d, addr = %s; want a second try on another port than %d", tries, r.Addr(), taken)
	}
	if err := r.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

func TestServerGoneAfterCleanup(t *testing.T) {
	var pid int
	t.Run("start", func(t *testing.T) { pid = StartRedis(t).Pid() })
	if pid == 0 {
		t.Skip("redis did not start")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("redis pid %d after cleanup: kill(0) = %v, want ESRCH", pid, err)
	}
}

// TestServerDiesWithTestBinary runs this test binary as a child that starts
// redis and SIGKILLs the child: Pdeathsig must take redis down with it.
func TestServerDiesWithTestBinary(t *testing.T) {
	if os.Getenv("TESTENV_HELPER") == "1" {
		r := StartRedis(t)
		fmt.Printf("PID %d\n", r.Pid())
		select {} // until killed
	}
	if _, err := exec.LookPath("redis-server"); err != nil && os.Getenv("ELECTD_REDIS_SERVER") == "" {
		StartRedis(t) // skips or fails, with the usual message
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestBinary$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTENV_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid, err := readPID(out)
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill helper: %v", err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for deathsig.Alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("redis pid %d still running after its parent was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPID reads the helper's output until its "PID n" line.
func readPID(out interface{ Read([]byte) (int, error) }) (int, error) {
	var buf strings.Builder
	b := make([]byte, 1)
	for {
		if _, err := out.Read(b); err != nil {
			return 0, fmt.Errorf("read pid: %w (output: %s)", err, buf.String())
		}
		buf.WriteByte(b[0])
		s := buf.String()
		if i := strings.Index(s, "PID "); i >= 0 && strings.HasSuffix(s, "\n") {
			return strconv.Atoi(strings.TrimSpace(s[i+4:]))
		}
	}
}
