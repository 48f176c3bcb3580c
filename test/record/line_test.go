package record

import (
	"strings"
	"testing"
)

// A reader that follows a growing log line by line with ParseLine and
// Run.Add ends with the runs Parse gives.
func TestParseLineAndAdd(t *testing.T) {
	log := line(KindStart, "a", "7", 100, 0, "") +
		line(KindBeat, "a", "7", 100, 5, "") +
		line(KindStart, "b", "9", 200, 20, "") +
		line(KindStop, "a", "7", 100, 12, "") +
		line(KindExit, "b", "9", 200, 30, "-9")
	want, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	open := map[int]*Run{}
	var got []*Run
	for _, text := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		l, err := ParseLine(text)
		if err != nil {
			t.Fatal(err)
		}
		if l.Kind == KindStart {
			r := &Run{Node: l.Node, Token: l.Token, Pid: l.Pid, Start: l.At}
			open[l.Pid] = r
			got = append(got, r)
			continue
		}
		if err := open[l.Pid].Add(l); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d runs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].String() != want[i].String() {
			t.Errorf("run %d: %s, want %s", i, got[i], want[i])
		}
	}
	if l, _ := ParseLine(strings.TrimSpace(line(KindExit, "b", "9", 200, 30, "-9"))); l.Extra != "-9" || l.Pid != 200 || !l.At.Equal(ms(30)) {
		t.Errorf("ParseLine: %+v", l)
	}
	var none *Run
	if err := none.Add(Line{Kind: KindBeat, Pid: 1}); err == nil || !strings.Contains(err.Error(), "no start line") {
		t.Errorf("Add to no run: %v", err)
	}
}
