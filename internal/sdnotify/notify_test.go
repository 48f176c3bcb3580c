package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listen returns a unixgram socket at name (a path, or @abstract) and a
// function that reads one datagram from it, failing t after 10 s.
func listen(t *testing.T, name string) func() string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func() string {
		t.Helper()
		buf := make([]byte, 4096)
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
}

func TestSendPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	read := listen(t, path)
	t.Setenv("NOTIFY_SOCKET", path)
	if err := FromEnv().Send("READY=1", "STATUS=leading (token 3)"); err != nil {
		t.Fatal(err)
	}
	if got, want := read(), "READY=1\nSTATUS=leading (token 3)\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestSendAbstract(t *testing.T) {
	name := fmt.Sprintf("@electd-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	read := listen(t, name)
	if err := New(name).Send("STOPPING=1"); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "STOPPING=1\n" {
		t.Fatalf("got %q", got)
	}
	// The name is in the abstract namespace, not a file of that name.
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("a file %q exists: %v", name, err)
	}
}

// TestUnsetIsNoop: without $NOTIFY_SOCKET nothing is sent and nothing fails.
func TestUnsetIsNoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	n := FromEnv()
	if n != nil {
		t.Fatalf("FromEnv without NOTIFY_SOCKET = %+v, want nil", n)
	}
	if err := n.Send("READY=1"); err != nil {
		t.Fatal(err)
	}
}

func TestSendErrors(t *testing.T) {
	if err := New("vsock:2:999").Send("READY=1"); err == nil {
		t.Fatal("a vsock address was accepted")
	}
	if err := New(filepath.Join(t.TempDir(), "nobody")).Send("READY=1"); err == nil {
		t.Fatal("sending to a socket nobody listens on did not fail")
	}
}

func TestWatchdogInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "3000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	if got := WatchdogInterval(); got != 3*time.Second {
		t.Fatalf("got %s, want 3s", got)
	}
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	if got := WatchdogInterval(); got != 0 {
		t.Fatalf("another process's watchdog: got %s, want 0", got)
	}
	t.Setenv("WATCHDOG_PID", "")
	t.Setenv("WATCHDOG_USEC", "")
	if got := WatchdogInterval(); got != 0 {
		t.Fatalf("no watchdog: got %s, want 0", got)
	}
}

func TestNotifyVar(t *testing.T) {
	for kv, want := range map[string]bool{
		"NOTIFY_SOCKET=/run/systemd/notify": true, "WATCHDOG_USEC=1": true, "WATCHDOG_PID=2": true,
		"NOTIFY_SOCKETS=x": false, "PATH=/bin": false, "HOME": false,
	} {
		if got := NotifyVar(kv); got != want {
			t.Errorf("NotifyVar(%q) = %v, want %v", kv, got, want)
		}
	}
}
