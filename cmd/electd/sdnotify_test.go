package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// notifications listens on a unixgram socket as systemd does for a unit
// of Type=notify; its lines are every line of every datagram received.
type notifications struct {
	socket  string
	lines   chan string
	seen    lockedBuffer // every line, for failure messages
	skipped []string     // lines read by expect that matched nothing yet (the test's goroutine only)
}

func listenNotify(t *testing.T) *notifications {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	n := &notifications{socket: filepath.Join(dir, "notify"), lines: make(chan string, 1000)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				close(n.lines)
				return
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(buf[:k]), "\n"), "\n") {
				_, _ = n.seen.Write([]byte(l + "\n"))
				n.lines <- l
			}
		}
	}()
	return n
}

// expect waits for a line that matches re and returns its submatches. A
// line an earlier expect read past still counts: electd sends what its
// parts report as they report it (STATUS=leading may come before READY=1
// when the campaign wins at once), and the test asserts each is sent, not
// their order.
func (n *notifications) expect(t *testing.T, re string, log *lockedBuffer) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	for i, l := range n.skipped {
		if m := rx.FindStringSubmatch(l); m != nil {
			n.skipped = append(n.skipped[:i], n.skipped[i+1:]...)
			return m
		}
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-n.lines:
			if !ok {
				t.Fatalf("the socket closed before %q:\n%s", re, n.seen.String())
			}
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
			n.skipped = append(n.skipped, l)
		case <-timeout:
			t.Fatalf("no notification %q within 30s; received:\n%s\nelectd's log:\n%s", re, n.seen.String(), log.String())
		}
	}
}

// TestSystemdNotify runs two copies of `electd run` as two units of
// Type=notify would: each reports READY=1 once it has joined, the first
// STATUS=leading with its token, the second STATUS=following the first;
// SIGTERM gives STOPPING=1, and the second then leads with a greater
// token. The child sees neither NOTIFY_SOCKET nor WATCHDOG_*, and the
// watchdog is fed while the loop runs.
func TestSystemdNotify(t *testing.T) {
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "env-notify-a")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The leader's child says what it sees of systemd's variables (the
	// second copy's child writes a plain file of its own).
	child := `echo "notify=${NOTIFY_SOCKET-unset} usec=${WATCHDOG_USEC-unset} pid=${WATCHDOG_PID-unset}" > ` + dir + `/env-$ELECTD_ID; exec sleep 1000`
	start := func(id string, n *notifications) (*lockedBuffer, func() error, func(syscall.Signal)) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		t.Cleanup(cancel)
		cmd := electdCmd(ctx, t, []string{"NOTIFY_SOCKET=" + n.socket, "WATCHDOG_USEC=200000"},
			"run", "--store", store, "--election", "sd-notify", "--id", id, "--listen", "127.0.0.1:0",
			"--ttl", "10s", "--stop-timeout", "2s", "--containment", "pgroup", "--shell", "--", child)
		var errb lockedBuffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return &errb, cmd.Wait, func(s syscall.Signal) {
			if err := cmd.Process.Signal(s); err != nil {
				t.Fatal(err)
			}
		}
	}

	na := listenNotify(t)
	logA, waitA, signalA := start("notify-a", na)
	na.expect(t, `^READY=1$`, logA)
	tokA, _ := strconv.ParseUint(na.expect(t, `^STATUS=leading \(token (\d+)\)$`, logA)[1], 10, 64)
	na.expect(t, `^WATCHDOG=1$`, logA)

	env := make(chan string, 1)
	go func() { b, _ := os.ReadFile(fifo); env <- string(b) }() // blocks until the child writes
	select {
	case e := <-env:
		if want := "notify=unset usec=unset pid=unset\n"; e != want {
			t.Fatalf("the child sees %q, want %q", e, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the child did not write its environment within 30s:\n%s", logA.String())
	}

	nb := listenNotify(t)
	logB, waitB, signalB := start("notify-b", nb)
	nb.expect(t, `^READY=1$`, logB)
	nb.expect(t, `^STATUS=following notify-a$`, logB)

	signalA(syscall.SIGTERM)
	na.expect(t, `^STOPPING=1$`, logA)
	na.expect(t, `^STATUS=stopping$`, logA)
	wantExit(t, waitA(), 0, logA)

	tokB, _ := strconv.ParseUint(nb.expect(t, `^STATUS=leading \(token (\d+)\)$`, logB)[1], 10, 64)
	if tokB <= tokA {
		t.Fatalf("the second copy leads with token %d, not above the first's %d", tokB, tokA)
	}
	signalB(syscall.SIGTERM)
	nb.expect(t, `^STOPPING=1$`, logB)
	wantExit(t, waitB(), 0, logB)
	t.Logf("first copy:\n%ssecond copy:\n%s", na.seen.String(), nb.seen.String())
}
