package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestAdminTokenRequired: --admin-token-required (here from its
// environment variable) reaches the HTTP server, so that POST /resign from
// loopback needs the token; without a token electd refuses to start.
func TestAdminTokenRequired(t *testing.T) {
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()

	t.Run("without a token", func(t *testing.T) {
		r := runElectd(t, 30*time.Second, nil, "run", "--store", store, "--election", "tok", "--listen", "off",
			"--admin-token-required")
		if r.code != 2 || !strings.Contains(r.stderr, "admin-token-required") {
			t.Fatalf("want exit 2 naming --admin-token-required:\n%s", r)
		}
	})

	t.Run("loopback needs the token", func(t *testing.T) {
		const token = "s3cret-token-0123456789"
		listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := electdCmd(ctx, t, []string{"ELECTD_ADMIN_TOKEN_REQUIRED=true", "ELECTD_ADMIN_TOKEN=" + token},
			"run", "--store", store, "--election", "tok", "--id", "node-1", "--ttl", "3s", "--listen", listen)
		var errb lockedBuffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatalf("start electd run: %v", err)
		}
		defer func() {
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Errorf("electd run after SIGTERM: %v (want exit 0)\n%s", err, errb.String())
			}
		}()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if code, _ := httpGet(t, "http://"+listen+"/readyz"); code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("electd did not lead:\n%s", errb.String())
			}
			time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
		}
		tests := []struct {
			name string
			auth string
			code int
			body string
		}{
			{name: "no token", code: http.StatusForbidden, body: "needs the admin bearer token"},
			{name: "wrong token", auth: "Bearer nope", code: http.StatusForbidden, body: "needs the admin bearer token"},
			{name: "the token", auth: "Bearer " + token, code: http.StatusOK, body: `"resigned":true`},
		}
		for _, tc := range tests { // in order: the last one resigns
			t.Run(tc.name, func(t *testing.T) {
				code, body := httpDo(t, http.MethodPost, "http://"+listen+"/resign", tc.auth)
				if code != tc.code || !strings.Contains(body, tc.body) {
					t.Errorf("POST /resign from loopback = %d %s, want %d with %s", code, body, tc.code, tc.body)
				}
			})
		}
	})
}
