package testenv

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// httpDo makes one HTTP/1.1 request on a fresh connection, closed before it
// returns (no transport, so no goroutine outlives the call). With tlsCfg not
// nil the connection is TLS (for https:// URLs).
func httpDo(tlsCfg *tls.Config, method, url, body string) (string, error) {
	return httpDoAs(tlsCfg, method, url, body, "")
}

// httpDoAs is httpDo with a bearer token, when token is not empty.
func httpDoAs(tlsCfg *tls.Config, method, url, body, token string) (string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	req.Close = true
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	conn, err := dial(tlsCfg, req.URL.Host)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	if err := req.Write(conn); err != nil {
		return "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	return string(b), nil
}

// dial connects to addr, over TLS when tlsCfg is not nil, within probeTimeout.
func dial(tlsCfg *tls.Config, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: probeTimeout}
	if tlsCfg == nil {
		return d.Dial("tcp", addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, tlsCfg)
}

// redisAuth is the AUTH a probe sends first; an empty user means none.
type redisAuth struct{ user, password string }

// redisInfoPID sends PING and INFO server to a Redis server (after AUTH when
// auth.user is set, over TLS when tlsCfg is set) and returns the process_id
// it reports.
func redisInfoPID(tlsCfg *tls.Config, auth redisAuth, addr string) (int, error) {
	conn, err := dial(tlsCfg, addr)
	if err != nil {
		return 0, fmt.Errorf("ping redis: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	r := bufio.NewReader(conn)
	if auth.user != "" {
		if err := ask(conn, r, "redis auth", respCommand("AUTH", auth.user, auth.password), "+OK"); err != nil {
			return 0, err
		}
	}
	// INFO goes with PING: its answer is read after the PONG.
	if err := ask(conn, r, "ping redis", "PING\r\nINFO server\r\n", "+PONG"); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("redis info: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "$"))
	if err != nil || !strings.HasPrefix(line, "$") {
		return 0, fmt.Errorf("redis info: answer %q", strings.TrimSpace(line))
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return 0, fmt.Errorf("redis info: %w", err)
	}
	for _, l := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				return 0, fmt.Errorf("redis info: process_id %q: %w", v, err)
			}
			return pid, nil
		}
	}
	return 0, fmt.Errorf("redis info: no process_id")
}

// ask writes cmd to conn and reads one reply line from r, which must be want;
// its errors start with what.
func ask(conn net.Conn, r *bufio.Reader, what, cmd, want string) error {
	if _, err := io.WriteString(conn, cmd); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if strings.TrimSpace(line) != want {
		return fmt.Errorf("%s: answer %q", what, strings.TrimSpace(line))
	}
	return nil
}

// respCommand encodes a command as a RESP array of bulk strings.
func respCommand(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}
