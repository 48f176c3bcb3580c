package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestLockForget: on every store, `electd lock --forget NAME` without
// --yes shows the --once-per record and clears nothing (exit 2); with
// --yes it clears the record alone (exit 0), and the next run runs. A
// holder of the lock keeps it.
func TestLockForget(t *testing.T) {
	tests := []struct {
		name  string
		store func(t *testing.T) string
	}{
		{name: "etcd", store: func(t *testing.T) string { return "etcd://" + testenv.StartEtcd(t).Endpoint() }},
		{name: "redis", store: func(t *testing.T) string { return "redis://" + testenv.StartRedis(t).Addr() }},
		{name: "redlock", store: func(t *testing.T) string { return testenv.StartRedlock(t, 3).URL() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.store(t)
			ranFile := filepath.Join(t.TempDir(), "ran")
			runs := func() int {
				b, err := os.ReadFile(ranFile)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				return strings.Count(string(b), "\n")
			}
			electd := func(args ...string) result {
				t.Helper()
				return runElectd(t, time.Minute, nil, append([]string{"lock", "--store", st, "--ttl", "2s"}, args...)...)
			}
			job := func(want int) {
				t.Helper()
				r := electd("--once-per", "1h", "--wait", "30s", "job", "--", "sh", "-c", "echo ran >> "+ranFile)
				if r.code != 0 || runs() != want {
					t.Fatalf("the job ran %d times, want %d:\n%s", runs(), want, r)
				}
			}
			job(1)
			job(1) // on record: skipped

			r := electd("--forget", "job")
			if r.code != exitUsage {
				t.Fatalf("--forget without --yes: want exit %d:\n%s", exitUsage, r)
			}
			for _, s := range []string{"--forget would clear the run record of ", "(token ", ", finished ", ", lapsing ", "nothing cleared: add --yes"} {
				if !strings.Contains(r.stderr, s) {
					t.Fatalf("--forget without --yes does not say %q:\n%s", s, r)
				}
			}
			job(1) // still on record

			// A holder of the lock keeps it through --forget --yes.
			ctx, cancel := context.WithCancel(context.Background())
			holder := electdCmd(ctx, t, nil, "lock", "--store", st, "--ttl", "2s", "--id", "holder", "job", "--", "sleep", "600")
			var holderLog lockedBuffer
			holder.Stderr = &holderLog
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cancel(); _ = holder.Wait() })
			waitLog(t, &holderLog, "lock acquired")

			r = electd("--forget", "--yes", "job")
			if r.code != 0 || !strings.Contains(r.stdout, "lock job: cleared the run record of ") ||
				!strings.Contains(r.stdout, "held now by holder (token ") {
				t.Fatalf("--forget --yes while held: want exit 0, the record cleared and the holder named:\n%s", r)
			}
			if r := electd("--wait", "0", "job", "--", "true"); r.code != exitLockBusy {
				t.Fatalf("after --forget, the holder no longer holds the lock:\n%s", r)
			}
			if r := electd("--forget", "--yes", "job"); r.code != 0 || !strings.Contains(r.stdout, "no run on record; nothing to clear") {
				t.Fatalf("--forget --yes with nothing on record: want exit 0 and \"nothing to clear\":\n%s", r)
			}
			cancel()
			_ = holder.Wait()
			job(2) // the next run runs
		})
	}
}

// TestLockForgetUsage: --forget takes NAME alone, --yes needs --forget,
// and a store that does not answer within --wait exits 69.
func TestLockForgetUsage(t *testing.T) {
	dead := testenv.StartRedis(t)
	dead.Kill(t)
	tests := []struct {
		name string
		args []string
		code int
		says string
	}{
		{name: "command", args: []string{"--forget", "job", "--", "true"}, code: exitUsage, says: "lock --forget takes NAME alone"},
		{name: "no name", args: []string{"--forget"}, code: exitUsage, says: "lock --forget takes NAME alone"},
		{name: "yes alone", args: []string{"--yes", "job", "--", "true"}, code: exitUsage, says: "--yes confirms --forget"},
		{name: "unreachable", args: []string{"--wait", "1s", "--forget", "--yes", "job"}, code: exitNoStore,
			says: "lock job: --forget could not read the run record: the store redis://" + dead.Addr() + " cannot be reached"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runElectd(t, time.Minute, nil, append([]string{"lock", "--store", "redis://" + dead.Addr()}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
				t.Fatalf("want exit %d saying %q:\n%s", tc.code, tc.says, r)
			}
		})
	}
}
