package record

import (
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
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check passed, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check: %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckUsesStopOverLastBeat(t *testing.T) {
	a := Run{Node: "a", Token: 1, Start: ms(0), LastBeat: ms(5), Stop: ms(15)}
	b := Run{Node: "b", Token: 2, Start: ms(10), LastBeat: ms(20)}
	if err := Check([]Run{a, b}, Options{}); err == nil {
		t.Fatal("b started before a's stop line, but Check passed")
	}
}
