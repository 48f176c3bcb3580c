package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// A Tail read after each write of a growing log, into a Builder, ends with
// the log ParseAll gives, whatever the writes cut the lines at; it gives
// each line's offset in the file, and a missing file has no lines.
func TestTailBuilder(t *testing.T) {
	beat := strings.TrimSuffix(line(KindBeat, "a", "7", 100, 12, ""), "\n")
	log := line(KindStart, "a", "7", 100, 0, "") +
		line(KindSpawned, "a", "7", 100, 1, "101 group") +
		line(KindWorker, "a", "7", 101, 2, RoleGroup) +
		line(KindBeat, "a", "7", 100, 5, "") +
		beat[:len(beat)-4] + line(KindStart, "b", "9", 200, 20, "") + // torn
		line(KindWorker, "a", "7", 101, 21, RoleGroup) +
		line(KindStop, "a", "7", 100, 22, "") +
		line(KindExit, "b", "9", 200, 30, "-9")
	want, err := ParseAll(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "record.log")
	tail := Tail{Path: path}
	var (
		b    Builder
		offs []int64
	)
	read := func() {
		t.Helper()
		if err := tail.Read(func(text string, at int64) error {
			if !strings.HasPrefix(log[at:], text+"\n") {
				t.Errorf("line %q at offset %d: the file has %q there", text, at, log[at:min(len(log), int(at)+len(text)+1)])
			}
			offs = append(offs, at)
			return b.Add(text)
		}); err != nil {
			t.Fatal(err)
		}
	}
	read() // no file yet
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for rest := log; rest != ""; {
		n := min(len(rest), 37) // cuts lines anywhere
		if _, err := f.WriteString(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
		read()
		if got := b.Log(); len(got.Runs) > len(want.Runs) || len(got.Workers) > len(want.Workers) {
			t.Fatalf("after %d bytes: %+v", len(log)-len(rest), got)
		}
	}
	if len(offs) != strings.Count(log, "\n") {
		t.Errorf("%d lines read, the log has %d", len(offs), strings.Count(log, "\n"))
	}
	got := b.Log()
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got.Torn) != 1 {
		t.Fatalf("followed log\n%+v\nParseAll\n%+v", got, want)
	}
	// A copy: later lines do not change it.
	if err := b.Add(strings.TrimSuffix(line(KindTerm, "b", "9", 200, 40, ""), "\n")); err != nil {
		t.Fatal(err)
	}
	if len(got.Runs[1].Terms) != 0 || len(b.Log().Runs[1].Terms) != 1 {
		t.Errorf("Log after a term line: %v, then %v", got.Runs[1], b.Log().Runs[1])
	}
}

// A line Builder.Add refuses changes nothing, and Tail.Read goes on after
// the line its fn refused.
func TestBuilderRefuses(t *testing.T) {
	var b Builder
	for _, text := range []string{
		line(KindStart, "a", "7", 100, 0, ""),
		line(KindExit, "a", "7", 100, 5, "x"),  // bad exit code, after a change of LastBeat
		line(KindBeat, "a", "7", 200, 6, ""),   // no start line
		line(KindWorker, "a", "7", 101, 7, ""), // no role
		line(KindWorker, "a", "7", 101, 8, RoleGroup),
		line(KindWorker, "a", "7", 101, 9, RoleDaemon), // another role
		"dance a 7 100 10",
	} {
		_ = b.Add(strings.TrimSuffix(text, "\n"))
	}
	lg := b.Log()
	if len(lg.Runs) != 1 || !lg.Runs[0].LastBeat.IsZero() || !lg.Runs[0].Exit.IsZero() {
		t.Errorf("runs %+v: want one, without a last beat or exit", lg.Runs)
	}
	if len(lg.Workers) != 1 || lg.Workers[0].Lines != 1 || lg.Workers[0].Role != RoleGroup {
		t.Errorf("workers %+v: want the group worker, one line", lg.Workers)
	}

	path := filepath.Join(t.TempDir(), "record.log")
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tail := Tail{Path: path}
	var got []string
	refuse := errors.New("refused")
	for range 3 {
		err := tail.Read(func(text string, _ int64) error {
			got = append(got, text)
			if text == "two" {
				return refuse
			}
			return nil
		})
		if err != nil && !errors.Is(err, refuse) {
			t.Fatal(err)
		}
	}
	if strings.Join(got, " ") != "one two three" {
		t.Errorf("lines %q, want one, two, three once each", got)
	}
}
