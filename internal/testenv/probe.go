package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// httpDo makes one HTTP/1.1 request on a fresh connection, closed before it
// returns (no transport, so no goroutine outlives the call).
func httpDo(method, url, body string) (string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	req.Close = true
	conn, err := net.DialTimeout("tcp", req.URL.Host, probeTimeout)
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

// redisInfoPID sends PING and INFO server to a Redis server and returns the
// process_id it reports.
func redisInfoPID(addr string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return 0, fmt.Errorf("ping redis: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeTimeout))
	if _, err := io.WriteString(conn, "PING\r\nINFO server\r\n"); err != nil {
		return 0, fmt.Errorf("ping redis: %w", err)
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("ping redis: %w", err)
	}
	if strings.TrimSpace(line) != "+PONG" {
		return 0, fmt.Errorf("ping redis: answer %q", strings.TrimSpace(line))
	}
	line, err = r.ReadString('\n')
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
