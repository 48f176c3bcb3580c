package health

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSeparateAdmin(t *testing.T) {
	resigned := 0
	s, _ := newTestServer(t, func(c *Config) {
		c.SeparateAdmin = true
		c.Leading = func() bool { return true }
		c.Resign = func(context.Context) error { resigned++; return nil }
	})
	if s.AdminHandler() == nil {
		t.Fatal("AdminHandler() = nil with SeparateAdmin")
	}
	const loop, remote = "127.0.0.1:5000", "192.0.2.1:5000"
	tests := []struct {
		name         string
		admin        bool // through AdminHandler, else Handler
		method, path string
		remote       string
		code         int
	}{
		{"main has no metrics", false, "GET", "/metrics", loop, http.StatusNotFound},
		{"main has no resign", false, "POST", "/resign", loop, http.StatusNotFound},
		{"main keeps leader", false, "GET", "/leader", loop, http.StatusServiceUnavailable},
		{"main keeps readyz", false, "GET", "/readyz", loop, http.StatusOK},
		{"admin has metrics", true, "GET", "/metrics", remote, http.StatusOK},
		{"admin resign from afar needs the token", true, "POST", "/resign", remote, http.StatusForbidden},
		{"admin resign from loopback", true, "POST", "/resign", loop, http.StatusOK},
		{"admin has no leader", true, "GET", "/leader", loop, http.StatusNotFound},
		{"admin has no readyz", true, "GET", "/readyz", loop, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := doOn(t, s, tc.admin, tc.method, tc.path, tc.remote, nil)
			if w.Code != tc.code {
				t.Fatalf("%s %s = %d, want %d: %s", tc.method, tc.path, w.Code, tc.code, w.Body)
			}
		})
	}
	if resigned != 1 {
		t.Fatalf("Resign called %d times, want 1", resigned)
	}
}

func TestAdminOnMainByDefault(t *testing.T) {
	s, _ := newTestServer(t, nil)
	if s.AdminHandler() != nil {
		t.Fatal("AdminHandler() != nil without SeparateAdmin")
	}
	w := do(t, s, "GET", "/metrics", "127.0.0.1:1", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", w.Code)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ServeAdmin(context.Background(), ln); err == nil {
		t.Fatal("ServeAdmin without SeparateAdmin: want an error")
	}
}

// TestServeBothListeners serves the two handlers on real listeners and
// shuts both down.
func TestServeBothListeners(t *testing.T) {
	s, _ := newTestServer(t, func(c *Config) { c.SeparateAdmin = true })
	ctx, cancel := context.WithCancel(context.Background())
	lnMain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lnAdmin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- s.Serve(ctx, lnMain) }()
	go func() { done <- s.ServeAdmin(ctx, lnAdmin) }()

	get := func(addr, path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(lnMain.Addr().String(), "/metrics"); code != http.StatusNotFound {
		t.Errorf("main /metrics = %d, want 404", code)
	}
	if code, body := get(lnAdmin.Addr().String(), "/metrics"); code != http.StatusOK {
		t.Errorf("admin /metrics = %d, want 200: %s", code, body)
	}
	if code, _ := get(lnMain.Addr().String(), "/livez"); code != http.StatusOK {
		t.Errorf("main /livez = %d, want 200", code)
	}
	cancel()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("servers did not stop")
		}
	}
}

// TestResignRequireToken: with RequireToken a loopback peer (such as a
// sidecar proxy: Istio's Envoy connects from 127.0.0.6) needs the token
// like any other; without it loopback is trusted.
func TestResignRequireToken(t *testing.T) {
	const token = "s3cret-token-0123456789"
	withToken := http.Header{"Authorization": {"Bearer " + token}}
	wrongToken := http.Header{"Authorization": {"Bearer nope"}}
	tests := []struct {
		name    string
		require bool
		admin   bool // through AdminHandler (SeparateAdmin), else Handler
		remote  string
		hdr     http.Header
		code    int
	}{
		{name: "off: loopback v4 without token", remote: "127.0.0.1:40000", code: http.StatusOK},
		{name: "off: sidecar 127.0.0.6 without token", remote: "127.0.0.6:40000", code: http.StatusOK},
		{name: "off: loopback v6 without token", remote: "[::1]:40000", code: http.StatusOK},
		{name: "off: remote without token", remote: "10.0.0.5:1234", code: http.StatusForbidden},
		{name: "off: remote with token", remote: "10.0.0.5:1234", hdr: withToken, code: http.StatusOK},
		{name: "on: loopback v4 without token", require: true, remote: "127.0.0.1:40000", code: http.StatusForbidden},
		{name: "on: sidecar 127.0.0.6 without token", require: true, remote: "127.0.0.6:40000", code: http.StatusForbidden},
		{name: "on: loopback v6 without token", require: true, remote: "[::1]:40000", code: http.StatusForbidden},
		{name: "on: loopback v4-mapped v6 without token", require: true, remote: "[::ffff:127.0.0.1]:40000", code: http.StatusForbidden},
		{name: "on: sidecar 127.0.0.6 with wrong token", require: true, remote: "127.0.0.6:40000", hdr: wrongToken, code: http.StatusForbidden},
		{name: "on: sidecar 127.0.0.6 with token", require: true, remote: "127.0.0.6:40000", hdr: withToken, code: http.StatusOK},
		{name: "on: loopback v6 with token", require: true, remote: "[::1]:40000", hdr: withToken, code: http.StatusOK},
		{name: "on: remote without token", require: true, remote: "10.0.0.5:1234", code: http.StatusForbidden},
		{name: "on: remote with token", require: true, remote: "10.0.0.5:1234", hdr: withToken, code: http.StatusOK},
		{name: "on: admin listener, loopback without token", require: true, admin: true, remote: "127.0.0.1:40000", code: http.StatusForbidden},
		{name: "on: admin listener, loopback with token", require: true, admin: true, remote: "127.0.0.1:40000", hdr: withToken, code: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resigned := 0
			s, _ := newTestServer(t, func(c *Config) {
				c.AdminToken, c.RequireToken, c.SeparateAdmin = token, tc.require, tc.admin
				c.Leading = func() bool { return true }
				c.Resign = func(context.Context) error { resigned++; return nil }
			})
			w := doOn(t, s, tc.admin, "POST", "/resign", tc.remote, tc.hdr)
			if w.Code != tc.code {
				t.Fatalf("POST /resign from %s = %d, want %d: %s", tc.remote, w.Code, tc.code, w.Body)
			}
			if got, want := resigned == 1, tc.code == http.StatusOK; got != want || resigned > 1 {
				t.Errorf("Resign called %d times, want it called = %v", resigned, want)
			}
			if tc.code == http.StatusForbidden && tc.require {
				if m := decode(t, w); !strings.Contains(m["error"].(string), "needs the admin bearer token") {
					t.Errorf("error = %q, want it to say the token is needed", m["error"])
				}
			}
		})
	}
}
