package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// TestLogDurations: both log formats write durations as Go writes them
// ("5s"), not as nanoseconds, wherever the attribute sits.
func TestLogDurations(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		path []string // the attribute's keys in the JSON record
		want string
	}{
		{name: "attribute", log: func(l *slog.Logger) { l.Info("m", "stop_timeout", 5*time.Second) },
			path: []string{"stop_timeout"}, want: "5s"},
		{name: "in a group", log: func(l *slog.Logger) { l.Info("m", slog.Group("etcd", "backoff", 50*time.Millisecond)) },
			path: []string{"etcd", "backoff"}, want: "50ms"},
		{name: "with", log: func(l *slog.Logger) { l.With("waited", 90*time.Second).Info("m") },
			path: []string{"waited"}, want: "1m30s"},
		{name: "typed", log: func(l *slog.Logger) { l.Info("m", slog.Duration("ttl", 15*time.Second)) },
			path: []string{"ttl"}, want: "15s"},
	}
	for _, format := range []string{"json", "text"} {
		for _, tc := range tests {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				var out bytes.Buffer
				app := &cli.App{
					ErrWriter: &out,
					Flags: []cli.Flag{&cli.StringFlag{Name: "log-format", Value: "text"},
						&cli.StringFlag{Name: "log-level", Value: "info"}},
					Action: func(c *cli.Context) error {
						l, err := newLogger(c)
						if err != nil {
							return err
						}
						tc.log(l)
						return nil
					},
				}
				if err := app.Run([]string{"electd", "--log-format", format}); err != nil {
					t.Fatal(err)
				}
				if format == "text" {
					want := tc.path[len(tc.path)-1] + "=" + tc.want
					if !bytes.Contains(out.Bytes(), []byte(want)) {
						t.Fatalf("text record %q lacks %s", out.String(), want)
					}
					return
				}
				var rec map[string]any
				if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
					t.Fatalf("record %q: %v", out.String(), err)
				}
				var v any = rec
				for _, k := range tc.path {
					m, _ := v.(map[string]any)
					v = m[k]
				}
				if v != tc.want {
					t.Fatalf("record %s: %v = %#v, want %q", out.String(), tc.path, v, tc.want)
				}
			})
		}
	}
}
