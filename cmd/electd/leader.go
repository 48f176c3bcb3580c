package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
)

// leaderHelp is the description of `electd leader`.
const leaderHelp = "Prints the current leader of --election. Exit status 0 when there is one, 3 when there is none.\n" +
	"With --watch, prints every change until interrupted."

func leaderFlags() []cli.Flag {
	return append(storeFlags(),
		&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "print every leader change until interrupted"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
		&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "how long to wait for the store (without --watch)"},
	)
}

type leaderOut struct {
	Election string          `json:"election"`
	Leader   *elector.Leader `json:"leader"`
}

func leaderAction(c *cli.Context, log *slog.Logger) error {
	election, err := requireElection(c)
	if err != nil {
		return err
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return elector.Configf("output", "%q is not one of text, json", format)
	}
	if c.Args().Present() {
		return usagef("leader takes no arguments, got %q", c.Args().Slice())
	}
	timing, err := timingOf(c)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	cand := elector.Candidate{Election: election, ID: "observer-" + sanitizeID(host), Timing: timing, Logger: log}
	if _, err := cand.Validate(); err != nil {
		return err
	}
	// SIGTERM and SIGINT end the question, the store's opening included;
	// without --watch, so does --timeout.
	sigs := catchShutdown()
	defer sigs.Stop()
	ctx, opened := sigs.opening(c.Context)
	var signalled syscall.Signal
	ended := func() syscall.Signal {
		if opened != nil {
			signalled, opened = opened(), nil
		}
		return signalled
	}
	defer ended()
	if !c.Bool("watch") {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.Duration("timeout"), errLeaderTimeout)
		defer cancel()
	}
	failed := func(err error) error {
		if sig := ended(); sig != 0 {
			if c.Bool("watch") {
				return nil
			}
			return &signalError{sig: sig}
		}
		if errors.Is(context.Cause(ctx), errLeaderTimeout) {
			return fmt.Errorf("no answer within --timeout %s: %w", c.Duration("timeout"), err)
		}
		return err
	}
	st, el, done, err := openCandidate(ctx, c, log, cand)
	if err != nil {
		return failed(err)
	}
	defer done()
	print := func(w io.Writer, l elector.Leader) error {
		if format == "json" {
			out := leaderOut{Election: election}
			if !l.IsZero() {
				out.Leader = &l
			}
			return json.NewEncoder(w).Encode(out)
		}
		if l.IsZero() {
			_, err := fmt.Fprintf(w, "%s: no leader\n", election)
			return err
		}
		// The id and address are text from the store: escaped, they can
		// neither forge lines nor drive the terminal.
		_, err := fmt.Fprintf(w, "%s: %s token=%d address=%s since=%s\n", election, escapeText(l.ID), l.Token,
			escapeText(orDash(l.Address)), l.Since.UTC().Format(time.RFC3339))
		return err
	}

	if c.Bool("watch") {
		for l := range el.Observe(ctx) {
			if err := print(c.App.Writer, l); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		return nil
	}
	l, err := el.Leader(ctx)
	switch {
	case errors.Is(err, elector.ErrNoLeader):
		if err := print(c.App.Writer, elector.Leader{}); err != nil {
			return err
		}
		return errNoLeader
	case err != nil:
		return failed(fmt.Errorf("ask %s for the leader: %w", st.Redacted(), err))
	}
	return print(c.App.Writer, l)
}

// errLeaderTimeout is the cause of the end of `electd leader`'s --timeout.
var errLeaderTimeout = errors.New("--timeout expired")

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// escapeText escapes what a terminal would act on or not show: control
// characters (ESC, BEL, CR, LF…), invisible format characters (bidi
// overrides, zero-width spaces) and invalid UTF-8, in Go's notation
// (\x1b, \r, \u202e).
func escapeText(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case !strconv.IsPrint(r): // controls, format characters, unassigned
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sanitizeID makes a hostname usable as a candidate id.
func sanitizeID(s string) string {
	out := []rune{}
	for _, r := range s {
		if r > ' ' && r != '/' && r != '{' && r != '}' && r < 0x7f {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return "unknown"
	}
	return string(out)
}
