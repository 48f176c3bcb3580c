package supervisor

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/test/proc"
)

// BenchmarkTreeTeardown measures, per containment mode, the time from the
// death of the child's main process (SIGKILL, as an OOM kill) to the death
// of the last of its three workers (one in its group, one setsid'd, one
// daemonised), as electd's term loop handles it: wait for the exit, then
// Stop what is left. Every pid is watched from /proc every 200 µs, so the
// figures are good to about that. Run:
//
//	go test -run '^$' -bench TreeTeardown -benchtime 20x ./supervisor/
func BenchmarkTreeTeardown(b *testing.B) {
	for _, mode := range modes {
		b.Run(string(mode), func(b *testing.B) {
			if _, _, err := ResolveContainment(mode); err != nil {
				b.Skipf("SKIP: %v", err)
			}
			var gaps []time.Duration
			for range b.N {
				gaps = append(gaps, teardownOnce(b, mode))
			}
			slices.Sort(gaps)
			b.ReportMetric(ms(gaps[len(gaps)/2]), "ms-median")
			b.ReportMetric(ms(gaps[len(gaps)-1]), "ms-max")
			b.ReportMetric(ms(gaps[0]), "ms-min")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func teardownOnce(b *testing.B, mode Containment) time.Duration {
	b.Helper()
	dir := b.TempDir()
	pids, goFile := filepath.Join(dir, "pids"), filepath.Join(dir, "go")
	worker := filepath.Join(dir, "worker.sh")
	self := "read p rest < /proc/self/stat\necho \"$p\" >> " + pids + "\n"
	must(b, os.WriteFile(worker, []byte("#!/bin/sh\ntrap '' TERM\n"+self+"exec sleep 1000\n"), 0o755))
	main := filepath.Join(dir, "main.sh")
	must(b, os.WriteFile(main, []byte("#!/bin/sh\n"+self+
		worker+" &\nsetsid "+worker+" &\nsh -c 'setsid "+worker+" &' &\n"+
		"while [ ! -e "+goFile+" ]; do sleep 0.001; done\nkill -9 $$\n"), 0o755))
	c, err := StartChild(ChildSpec{Path: main, Containment: mode}, nil)
	must(b, err)
	var all []int
	deadline := time.Now().Add(10 * time.Second)
	for len(all) < 4 {
		if time.Now().After(deadline) {
			b.Fatal("the tree did not start")
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
		all = readPids(pids)
	}
	// As hold does: once the main process is reaped, Stop the rest.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-c.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		_, _ = c.Stop(ctx)
	}()
	gone := make([]time.Time, len(all))
	var wg sync.WaitGroup
	for i, p := range all {
		wg.Go(func() {
			at, ok := proc.GoneAt(p, 10*time.Second, 200*time.Microsecond)
			if !ok {
				b.Errorf("pid %d still alive after 10 s", p)
			}
			gone[i] = at
		})
	}
	must(b, os.WriteFile(goFile, nil, 0o644))
	wg.Wait()
	<-stopped
	mainGone, workers := gone[0], gone[1:]
	sort.Slice(workers, func(i, j int) bool { return workers[i].Before(workers[j]) })
	return max(0, workers[len(workers)-1].Sub(mainGone))
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkChildStartExit measures a whole short life of a child (start
// /bin/true, wait for its exit, Stop) per containment mode: under pidns
// that includes the namespace init (electd re-executed).
//
//	go test -run '^$' -bench ChildStartExit ./supervisor/
func BenchmarkChildStartExit(b *testing.B) {
	for _, mode := range modes {
		b.Run(string(mode), func(b *testing.B) {
			if _, _, err := ResolveContainment(mode); err != nil {
				b.Skipf("SKIP: %v", err)
			}
			for range b.N {
				c, err := StartChild(ChildSpec{Path: "/bin/true", Containment: mode}, nil)
				must(b, err)
				<-c.Done()
				if _, err := c.Stop(context.Background()); err != nil {
					b.Fatal(err)
				}
				if c.Exit().Code != 0 {
					b.Fatalf("exit %+v", c.Exit())
				}
			}
		})
	}
}

// BenchmarkBeginPrepared measures a term's start under pidns and userns
// with the init prepared ahead of it: from Begin (the go message) until
// the command runs, as a term's critical path has it. Preparing the next
// init is outside the timer, as a candidate does it while it waits.
//
//	go test -run '^$' -bench BeginPrepared ./supervisor/
func BenchmarkBeginPrepared(b *testing.B) {
	for _, mode := range []Containment{ContainPidns, ContainUserns} {
		b.Run(string(mode), func(b *testing.B) {
			if _, _, err := ResolveContainment(mode); err != nil {
				b.Skipf("SKIP: %v", err)
			}
			spec := ChildSpec{Path: "/bin/true", Containment: mode}
			for range b.N {
				b.StopTimer()
				c, err := PrepareChild(spec, nil, time.Time{})
				must(b, err)
				b.StartTimer()
				must(b, c.Begin(spec))
				b.StopTimer()
				<-c.Done()
				if _, err := c.Stop(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkExitToDone measures, per containment mode, the end of a term's
// child as the handover has it: from the command's last write (date prints
// the wall clock and exits; it is the whole tree) until Done, when electd
// knows the command is gone ("ms-median", "ms-p99"), and until Stop has
// returned, the sweep of what is left of the tree included ("stopped"):
// then the term may be given up. The init's start is outside the figures
// (prepared ahead under pidns and userns, as a candidate does). Run:
//
//	go test -run '^$' -bench ExitToDone -benchtime 200x ./supervisor/
func BenchmarkExitToDone(b *testing.B) {
	for _, mode := range modes {
		b.Run(string(mode), func(b *testing.B) {
			if _, _, err := ResolveContainment(mode); err != nil {
				b.Skipf("SKIP: %v", err)
			}
			var done, stopped []time.Duration
			for range b.N {
				d, s := exitToDone(b, mode)
				done, stopped = append(done, d), append(stopped, s)
			}
			slices.Sort(done)
			slices.Sort(stopped)
			b.ReportMetric(ms(done[len(done)/2]), "ms-median")
			b.ReportMetric(ms(done[len(done)*99/100]), "ms-p99")
			b.ReportMetric(ms(stopped[len(stopped)/2]), "ms-stopped-median")
			b.ReportMetric(ms(stopped[len(stopped)*99/100]), "ms-stopped-p99")
		})
	}
}

func exitToDone(b *testing.B, mode Containment) (done, stopped time.Duration) {
	b.Helper()
	pr, pw, err := os.Pipe()
	must(b, err)
	defer pr.Close()
	spec := ChildSpec{Path: "/bin/date", Args: []string{"+%s%N"}, Containment: mode, Stdout: pw}
	var c *Child
	if mode == ContainPgroup {
		c, err = StartChild(spec, nil)
		must(b, err)
	} else {
		c, err = PrepareChild(spec, nil, time.Time{})
		must(b, err)
		must(b, c.Begin(spec))
	}
	pw.Close()
	line, err := bufio.NewReader(pr).ReadString('\n')
	must(b, err)
	<-c.Done()
	doneAt := time.Now()
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	must(b, err)
	if _, err := c.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
	last := time.Unix(0, ns)
	return doneAt.Sub(last), time.Since(last)
}
