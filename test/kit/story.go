package kit

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// StoryLine is how long a line of Story may be.
const StoryLine = 220

// Story is the last n events of electd id's log at path, one short line
// each, for the head of a failure message: only INFO and above, without the
// store retries' own lines (Tail has everything). A CI report may keep only
// the start and the end of a long failure, so this short form goes first.
func Story(id, path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("--- %s: %v", id, err)
	}
	var lines []string
	for _, raw := range strings.Split(string(b), "\n") {
		if s, ok := storyLine(raw); ok {
			lines = append(lines, s)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- %s, last %d events:\n  %s", id, len(lines), strings.Join(lines, "\n  "))
}

// storyLine renders one JSON log line as "15:04:05.000 LEVEL msg k=v ...",
// or reports false for a line Story leaves out.
func storyLine(raw string) (string, bool) {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber() // 500000000, not 5e+08
	if d.Decode(&m) != nil {
		return "", false
	}
	level, _ := m["level"].(string)
	msg, _ := m["msg"].(string)
	if level == "DEBUG" || strings.Contains(msg, "store request failed") {
		return "", false
	}
	at := ""
	if s, ok := m["time"].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			at = t.Format("15:04:05.000")
		}
	}
	delete(m, "time")
	delete(m, "level")
	delete(m, "msg")
	var attrs []string
	flatten("", m, &attrs)
	sort.Strings(attrs)
	s := strings.TrimSpace(fmt.Sprintf("%s %s %s %s", at, level, msg, strings.Join(attrs, " ")))
	if len(s) > StoryLine {
		s = s[:StoryLine] + "…"
	}
	return s, true
}

func flatten(prefix string, m map[string]any, out *[]string) {
	for k, v := range m {
		switch v := v.(type) {
		case map[string]any:
			flatten(prefix+k+".", v, out)
		default:
			*out = append(*out, fmt.Sprintf("%s%s=%v", prefix, k, v))
		}
	}
}
