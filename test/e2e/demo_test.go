package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/deathsig"
	"github.com/electd/electd/test/proc"
)

// TestDemo runs `electd demo` (embedded etcd, three sidecars, scripted
// resign, kill -9 and SIGTERM) once: it must exit 0 having done a kill -9
// and found no overlapping jobs.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.Electd, "demo", "--duration", "10s")
	cmd.Env = proc.BaseEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	p, err := deathsig.Start(cmd)
	if err == nil {
		<-p.Done()
		err = p.Err()
	}
	text := out.String()
	if err != nil {
		t.Fatalf("electd demo: %v\n%s", err, text)
	}
	for _, want := range []string{"kill -9", "overlapping pairs: 0"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	if _, summary, ok := strings.Cut(text, "\nsummary:"); ok {
		t.Logf("demo summary:%s", summary)
	}
}
