package record

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

// ms is t0 plus n milliseconds.
func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func line(kind, node, token string, pid, at int, extra string) string {
	return Format(kind, node, token, pid, ms(at), extra)
}

func TestParse(t *testing.T) {
	log := line(KindStart, "a", "7", 100, 0, "") +
		line(KindBeat, "a", "7", 100, 5, "") +
		line(KindGrandchild, "a", "7", 100, 6, "555") +
		line(KindStart, "b", "9", 200, 20, "") + // another writer interleaved
		line(KindTerm, "a", "7", 100, 8, "ignored") +
		line(KindBeat, "a", "7", 100, 10, "") +
		line(KindStop, "a", "7", 100, 12, "") +
		line(KindExit, "b", "9", 200, 30, "-9") +
		"beat b 9 200 99" // partial last line: ignored
	runs, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("got %d runs, want 2: %v", len(runs), runs)
	}
	a, b := runs[0], runs[1]
	if a.Node != "a" || a.Token != 7 || a.Pid != 100 || !a.Start.Equal(ms(0)) || !a.Stop.Equal(ms(12)) ||
		!a.LastBeat.Equal(ms(12)) || len(a.Terms) != 1 || !a.Terms[0].Equal(ms(8)) ||
		len(a.Grandchildren) != 1 || a.Grandchildren[0] != 555 || !a.Ended() || !a.End().Equal(ms(12)) {
		t.Errorf("run a = %+v", a)
	}
	if b.Node != "b" || b.Token != 9 || !b.Exit.Equal(ms(30)) || b.ExitCode != -9 || !b.End().Equal(ms(30)) {
		t.Errorf("run b = %+v", b)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, log, want string }{
		{"no start", line(KindBeat, "a", "1", 1, 0, ""), "no start line"},
		{"other node same pid", line(KindStart, "a", "1", 1, 0, "") + line(KindBeat, "b", "1", 1, 1, ""), "no start line"},
		{"token not a number", line(KindStart, "a", "-", 1, 0, ""), "token"},
		{"short", "start a 1\n", "want KIND"},
		{"unknown kind", line(KindStart, "a", "1", 1, 0, "") + line("dance", "a", "1", 1, 1, ""), "unknown kind"},
		{"bad exit code", line(KindStart, "a", "1", 1, 0, "") + line(KindExit, "a", "1", 1, 1, "x"), "exit code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.log))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestEndWithoutStop(t *testing.T) {
	runs, err := Parse(strings.NewReader(line(KindStart, "a", "1", 1, 0, "") + line(KindBeat, "a", "1", 1, 40, "")))
	if err != nil {
		t.Fatal(err)
	}
	if r := runs[0]; r.Ended() || !r.End().Equal(ms(40)) {
		t.Fatalf("run %v: Ended=%v End=%v, want false and the last beat", r, r.Ended(), r.End())
	}
}

func TestCheck(t *testing.T) {
	run := func(node string, token uint64, start, end int) Run {
		return Run{Node: node, Token: token, Pid: int(token), Start: ms(start), LastBeat: ms(end)}
	}
	tests := []struct {
		name string
		runs []Run
		opt  Options
		want []string // substrings of the error; none: no error
	}{
		{name: "empty"},
		{name: "one after another", runs: []Run{run("a", 1, 0, 10), run("b", 2, 11, 20), run("a", 5, 30, 40)}},
		{name: "given out of order", runs: []Run{run("b", 2, 11, 20), run("a", 1, 0, 10)}},
		{name: "overlap", runs: []Run{run("a", 1, 0, 10), run("b", 2, 9, 20)}, want: []string{"overlap"}},
		{name: "touching is overlap", runs: []Run{run("a", 1, 0, 10), run("b", 2, 10, 20)}, want: []string{"overlap"}},
		{name: "nested in a long run", runs: []Run{run("a", 1, 0, 100), run("b", 2, 20, 30), run("c", 3, 50, 60)},
			want: []string{"overlap: [b", "overlap: [c"}},
		{name: "token goes down", runs: []Run{run("a", 5, 0, 10), run("b", 4, 20, 30)}, want: []string{"token order"}},
		{name: "same token", runs: []Run{run("a", 5, 0, 10), run("a", 5, 20, 30)}, want: []string{"token order"}},
		{name: "restart allowed", runs: []Run{run("a", 5, 0, 10), run("a", 5, 20, 30)}, opt: Options{AllowRestarts: true}},
		{name: "restart on another node", runs: []Run{run("a", 5, 0, 10), run("b", 5, 20, 30)},
			opt: Options{AllowRestarts: true}, want: []string{"token order"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.runs, tt.opt)
			wantCheck(t, err, tt.want)
		})
	}
}

// Overlaps is the overlap part of Check alone: runs in any order, tokens
// not looked at.
func TestOverlaps(t *testing.T) {
	run := func(node string, token uint64, start, end int) Run {
		return Run{Node: node, Token: token, Pid: int(token), Start: ms(start), LastBeat: ms(end)}
	}
	if errs := Overlaps([]Run{run("b", 1, 20, 30), run("a", 5, 0, 10)}); len(errs) != 0 {
		t.Errorf("Overlaps of runs one after another, token going down: %v", errs)
	}
	errs := Overlaps([]Run{run("c", 3, 50, 60), run("a", 1, 0, 100), run("b", 2, 20, 30)})
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "overlap: [b") || !strings.Contains(errs[1].Error(), "overlap: [c") {
		t.Errorf("Overlaps of two runs nested in a long one: %v", errs)
	}
}

func TestCheckUsesStopOverLastBeat(t *testing.T) {
	a := Run{Node: "a", Token: 1, Start: ms(0), LastBeat: ms(5), Stop: ms(15)}
	b := Run{Node: "b", Token: 2, Start: ms(10), LastBeat: ms(20)}
	if err := Check([]Run{a, b}, Options{}); err == nil {
		t.Fatal("b started before a's stop line, but Check passed")
	}
}

func TestParseWorkers(t *testing.T) {
	log := line(KindStart, "a", "7", 100, 0, "") +
		line(KindSpawned, "a", "7", 100, 1, "101 group") +
		line(KindWorker, "a", "7", 101, 2, RoleGroup) +
		line(KindWorker, "a", "7", 103, 3, RoleDaemon) + // before its spawned line: the intermediate writes it
		line(KindSpawned, "a", "7", 100, 2, "103 daemon") +
		line(KindBeat, "a", "7", 100, 5, "") +
		line(KindWorker, "a", "7", 101, 7, RoleGroup) +
		line(KindExit, "a", "7", 100, 8, "-9") +
		line(KindWorker, "a", "7", 103, 12, RoleDaemon)
	lg, err := ParseAll(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Runs) != 1 || len(lg.Workers) != 2 {
		t.Fatalf("log %+v: want one run and two workers", lg)
	}
	r := lg.Runs[0]
	if len(r.Spawned) != 2 || r.Spawned[0] != (Spawn{101, RoleGroup, ms(1)}) || r.Spawned[1] != (Spawn{103, RoleDaemon, ms(2)}) {
		t.Errorf("spawned %+v", r.Spawned)
	}
	if !r.End().Equal(ms(8)) {
		t.Errorf("run ends %v, want its exit line (worker lines are not the run's)", r.End())
	}
	g, d := lg.Workers[0], lg.Workers[1]
	if g != (Worker{Node: "a", Token: 7, Pid: 101, Role: RoleGroup, First: ms(2), Last: ms(7), Lines: 2}) {
		t.Errorf("group worker %+v", g)
	}
	if d != (Worker{Node: "a", Token: 7, Pid: 103, Role: RoleDaemon, First: ms(3), Last: ms(12), Lines: 2}) {
		t.Errorf("daemon %+v", d)
	}
	if p, ok := lg.RunOf(d); !ok || p.Pid != 100 {
		t.Errorf("RunOf(daemon) = %v, %v", p, ok)
	}
	if ws := lg.WorkersOf(r); len(ws) != 2 {
		t.Errorf("WorkersOf = %v", ws)
	}
	if runs, err := Parse(strings.NewReader(log)); err != nil || len(runs) != 1 {
		t.Errorf("Parse of a log with workers: %v, %v", runs, err)
	}
	for _, bad := range []struct{ name, log, want string }{
		{"spawned without role", line(KindStart, "a", "7", 100, 0, "") + line(KindSpawned, "a", "7", 100, 1, "101"), "WORKERPID ROLE"},
		{"spawned bad pid", line(KindStart, "a", "7", 100, 0, "") + line(KindSpawned, "a", "7", 100, 1, "x group"), "worker pid"},
		{"worker without role", line(KindWorker, "a", "7", 101, 2, ""), "worker role"},
		{"worker changes role", line(KindWorker, "a", "7", 101, 2, RoleGroup) + line(KindWorker, "a", "7", 101, 3, RoleSetsid), "added to"},
		{"too many fields", "spawned a 7 100 1 101 group extra\n", "want KIND"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if _, err := ParseAll(strings.NewReader(bad.log)); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("err = %v, want one containing %q", err, bad.want)
			}
		})
	}
}

func TestCheckWorkers(t *testing.T) {
	run := func(node string, token uint64, pid, start, end int, spawned ...int) Run {
		r := Run{Node: node, Token: token, Pid: pid, Start: ms(start), LastBeat: ms(end)}
		for _, w := range spawned {
			r.Spawned = append(r.Spawned, Spawn{Pid: w, Role: RoleGroup, At: ms(start)})
		}
		return r
	}
	worker := func(node string, token uint64, pid, first, last int) Worker {
		return Worker{Node: node, Token: token, Pid: pid, Role: RoleGroup, First: ms(first), Last: ms(last), Lines: 2}
	}
	tests := []struct {
		name    string
		runs    []Run
		workers []Worker
		opt     Options
		want    []string // substrings of the error; none: no error
	}{
		{name: "workers gone before the next term",
			runs:    []Run{run("a", 1, 10, 0, 10, 11), run("b", 2, 20, 30, 40, 21)},
			workers: []Worker{worker("a", 1, 11, 1, 29), worker("b", 2, 21, 31, 50)}},
		{name: "worker outlives its run into the next term",
			runs:    []Run{run("a", 1, 10, 0, 10, 11), run("b", 2, 20, 30, 40)},
			workers: []Worker{worker("a", 1, 11, 1, 35)},
			want:    []string{"overlap: [a worker group token=1 pid=11", "after the later term [b token=2", "token 1 after 2"}},
		{name: "worker line at the next term's first line",
			runs:    []Run{run("a", 1, 10, 0, 10, 11), run("b", 2, 20, 30, 40)},
			workers: []Worker{worker("a", 1, 11, 1, 30)},
			want:    []string{"overlap: [a worker", "0s after the later term"}},
		{name: "worker of an old term writes after two later terms",
			runs:    []Run{run("a", 1, 10, 0, 10, 11), run("b", 2, 20, 30, 40), run("c", 3, 30, 50, 60)},
			workers: []Worker{worker("a", 1, 11, 1, 55)},
			want:    []string{"after the later term [b token=2"}},
		{name: "worker without a spawned line still belongs to its run",
			runs:    []Run{run("a", 1, 10, 0, 10), run("b", 2, 20, 30, 40)},
			workers: []Worker{worker("a", 1, 11, 1, 31)},
			want:    []string{"overlap: [a worker"}},
		{name: "worker survives a restart in place",
			runs:    []Run{run("a", 5, 10, 0, 10, 11), run("a", 5, 12, 20, 30)},
			workers: []Worker{worker("a", 5, 11, 1, 25)},
			opt:     Options{AllowRestarts: true},
			want:    []string{"overlap: [a worker group token=5 pid=11", "after the next run [a token=5 pid=12"}},
		{name: "restart after the workers are gone",
			runs:    []Run{run("a", 5, 10, 0, 10, 11), run("a", 5, 12, 20, 30, 13)},
			workers: []Worker{worker("a", 5, 11, 1, 19), worker("a", 5, 13, 21, 40)},
			opt:     Options{AllowRestarts: true}},
		{name: "worker of a token no run had",
			runs:    []Run{run("a", 1, 10, 0, 10)},
			workers: []Worker{worker("a", 9, 11, 1, 5)},
			want:    []string{"token order: [a worker group token=9", "no run of a"}},
		{name: "worker older than every run of its token",
			runs:    []Run{run("a", 1, 10, 20, 30)},
			workers: []Worker{worker("a", 1, 11, 1, 25)},
			want:    []string{"token order: [a worker group token=1"}},
		{name: "the last worker of the last term may run on",
			runs:    []Run{run("a", 1, 10, 0, 10, 11)},
			workers: []Worker{worker("a", 1, 11, 1, 1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Log{Runs: tt.runs, Workers: tt.workers}.Check(tt.opt)
			wantCheck(t, err, tt.want)
		})
	}
}

// ReadAll and Check on a real file: a worker line after the next term's
// start fails the check of the parsed log.
func TestReadAllCheck(t *testing.T) {
	path := t.TempDir() + "/record.log"
	log := line(KindStart, "a", "1", 10, 0, "") + line(KindSpawned, "a", "1", 10, 1, "11 setsid") +
		line(KindWorker, "a", "1", 11, 2, RoleSetsid) + line(KindExit, "a", "1", 10, 5, "-9") +
		line(KindStart, "b", "2", 20, 30, "") + line(KindWorker, "a", "1", 11, 31, RoleSetsid)
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	lg, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Check(Options{}); err == nil || !strings.Contains(err.Error(), "overlap: [a worker setsid token=1 pid=11") {
		t.Fatalf("Check = %v, want the setsid worker's overlap", err)
	}
	if err := Check(lg.Runs, Options{}); err != nil {
		t.Fatalf("Check of the runs alone: %v", err)
	}
	if lg, err := ReadAll(path + ".missing"); err != nil || len(lg.Runs)+len(lg.Workers) != 0 {
		t.Fatalf("ReadAll of a missing file: %+v, %v", lg, err)
	}
}

// A writer SIGKILLed during its write leaves a prefix of its line without
// the newline; the next writer's whole line follows it.
func TestSplitTorn(t *testing.T) {
	next := strings.TrimSuffix(line(KindStart, "n4", "211", 26775, 30, ""), "\n")
	beat := strings.TrimSuffix(line(KindBeat, "n1", "204", 26627, 10, ""), "\n")
	tests := []struct {
		name, text, fragment string
		ok                   bool
	}{
		{name: "in the timestamp", text: beat[:len(beat)-10] + next, fragment: beat[:len(beat)-10], ok: true},
		{name: "after a separator", text: "beat n1 204 26627 " + next, fragment: "beat n1 204 26627 ", ok: true},
		{name: "one byte", text: "b" + next, fragment: "b", ok: true},
		{name: "in the kind", text: "wor" + strings.TrimSuffix(line(KindWorker, "a", "7", 101, 2, RoleDaemon), "\n"), fragment: "wor", ok: true},
		{name: "the whole line but its newline", text: beat + next, fragment: beat, ok: true},
		{name: "garbage", text: "dance a 1 1 1"},
		{name: "a complete line is not torn", text: next},
		{name: "nothing complete after the fragment", text: beat[:20] + "start n4 211"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frag, l, ok := SplitTorn(tt.text)
			if ok != tt.ok || frag != tt.fragment {
				t.Fatalf("SplitTorn = %q, %v; want %q, %v", frag, ok, tt.fragment, tt.ok)
			}
			if ok && strings.TrimSuffix(Format(l.Kind, l.Node, strconv.FormatUint(l.Token, 10), l.Pid, l.At, l.Extra), "\n") != tt.text[len(frag):] {
				t.Errorf("the line after the fragment: %+v", l)
			}
		})
	}
	// Parsers drop the fragment and keep the line after it.
	log := line(KindStart, "n1", "204", 26627, 0, "") + beat[:len(beat)-10] + line(KindStart, "n4", "211", 26775, 30, "") +
		line(KindBeat, "n4", "211", 26775, 35, "")
	lg, err := ParseAll(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Runs) != 2 || len(lg.Torn) != 1 || lg.Torn[0] != beat[:len(beat)-10] || !lg.Runs[1].End().Equal(ms(35)) {
		t.Fatalf("log %+v: want two runs and one torn fragment", lg)
	}
}

// wantCheck fails t unless err is nil for no want, or contains every want.
func wantCheck(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("Check passed, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Check: %v\nwant it to contain %q", err, w)
		}
	}
}
