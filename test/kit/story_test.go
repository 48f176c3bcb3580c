package kit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	log := `=== torture: starting n1
{"time":"2026-12-01T20:22:05.380071196Z","level":"INFO","msg":"containment","mode":"pidns"}
{"time":"2026-12-01T20:22:05.4Z","level":"DEBUG","msg":"opening the store"}
{"time":"2026-12-01T20:22:06Z","level":"WARN","msg":"store request failed; retrying","redis":{"op":"renew"}}
{"time":"2026-12-01T20:22:07.392691443Z","level":"INFO","msg":"leadership acquired","redis":{"id":"n1","token":17}}
{"time":"2026-12-01T20:22:09.863348921Z","level":"WARN","msg":"lease deadline near without renewal; stopping before it lapses","supervisor":{"stop_timeout":500000000}}
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		n    int
		want []string
	}{
		{"all", 10, []string{
			"20:22:05.380 INFO containment mode=pidns",
			"20:22:07.392 INFO leadership acquired redis.id=n1 redis.token=17",
			"20:22:09.863 WARN lease deadline near without renewal; stopping before it lapses supervisor.stop_timeout=500000000",
		}},
		{"last one", 1, []string{
			"20:22:09.863 WARN lease deadline near without renewal; stopping before it lapses supervisor.stop_timeout=500000000",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Story("n1", path, tt.n)
			lines := strings.Split(got, "\n")
			if len(lines) != len(tt.want)+1 || !strings.HasPrefix(lines[0], "--- n1, last") {
				t.Fatalf("Story:\n%s\nwant a header and %d lines", got, len(tt.want))
			}
			for i, w := range tt.want {
				if strings.TrimSpace(lines[i+1]) != w {
					t.Errorf("line %d: %q, want %q", i+1, strings.TrimSpace(lines[i+1]), w)
				}
			}
		})
	}
}
