// Package sdnotify tells systemd what electd is doing, for a unit of
// Type=notify: the sd_notify(3) datagram protocol (notify.go) and the role
// of a copy of `electd run` as READY=1, STATUS= and STOPPING=1 (role.go).
// Without $NOTIFY_SOCKET it sends nothing; the same role goes to the
// --on-change hooks (Role.OnChange).
package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Notifier sends notifications to one socket. A nil *Notifier sends
// nothing.
type Notifier struct {
	addr *net.UnixAddr
}

// FromEnv returns a Notifier for $NOTIFY_SOCKET, or nil when it is unset.
func FromEnv() *Notifier { return New(os.Getenv("NOTIFY_SOCKET")) }

// New returns a Notifier for socket: a path, or a name in the abstract
// namespace when it starts with '@' (the net package maps the '@' to the
// leading NUL byte). An empty socket gives nil.
func New(socket string) *Notifier {
	if socket == "" {
		return nil
	}
	return &Notifier{addr: &net.UnixAddr{Name: socket, Net: "unixgram"}}
}

// Send sends lines ("READY=1", "STATUS=…") as one datagram. On a nil
// Notifier it does nothing.
func (n *Notifier) Send(lines ...string) error {
	if n == nil || len(lines) == 0 {
		return nil
	}
	if !strings.HasPrefix(n.addr.Name, "/") && !strings.HasPrefix(n.addr.Name, "@") {
		return fmt.Errorf("NOTIFY_SOCKET=%s: only a path or an abstract name (@…) is supported", n.addr.Name)
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("NOTIFY_SOCKET=%s: %w", n.addr.Name, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		return fmt.Errorf("NOTIFY_SOCKET=%s: %w", n.addr.Name, err)
	}
	return nil
}

// WatchdogInterval is $WATCHDOG_USEC when systemd's watchdog is on for
// this process ($WATCHDOG_PID unset or this pid), else 0.
func WatchdogInterval() time.Duration {
	if p := os.Getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(os.Getpid()) {
		return 0
	}
	us, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || us <= 0 {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

// NotifyVar reports whether kv (NAME=value) is one of systemd's
// notification variables, which address electd and not the command it
// runs: the command would otherwise notify in electd's name.
func NotifyVar(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	return name == "NOTIFY_SOCKET" || name == "WATCHDOG_USEC" || name == "WATCHDOG_PID"
}
