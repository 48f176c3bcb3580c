package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestVersion: `electd version`, `electd --version` and /metrics'
// electd_build_info name the same version, VCS revision ("unknown" when
// the build recorded none, as in a test binary) and Go version.
func TestVersion(t *testing.T) {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	line := fmt.Sprintf("electd %s (revision %s, %s)\n", buildVersion(), revision, runtime.Version())
	metric := fmt.Sprintf(`electd_build_info{goversion=%q,revision=%q,version=%q} 1`, runtime.Version(), revision, buildVersion())
	tests := []struct {
		name string
		get  func(t *testing.T) string
		want string
	}{
		{name: "version", get: func(t *testing.T) string { return runElectd(t, time.Minute, nil, "version").stdout }, want: line},
		{name: "--version", get: func(t *testing.T) string { return runElectd(t, time.Minute, nil, "--version").stdout }, want: line},
		{name: "metrics", get: func(t *testing.T) string {
			store := "etcd://" + testenv.StartEtcd(t).Endpoint()
			var body string
			collectRun(t, nil, []string{"--store", store}, func(what, s string) {
				if what == "GET admin /metrics" {
					body = s
				}
			})
			for _, l := range strings.Split(body, "\n") {
				if strings.HasPrefix(l, "electd_build_info") {
					return l
				}
			}
			return body
		}, want: metric},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.get(t); got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
