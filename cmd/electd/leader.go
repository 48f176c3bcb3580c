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
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/health"
)

// leaderHelp is the description of `electd leader`.
const leaderHelp = "Prints the current leader of --election. Exit status 0 when there is one, 3 when there is none,\n" +
	"1 when the store does not answer within --timeout.\n" +
	"With --watch, prints each new term once (its since as first seen) until interrupted. While the store\n" +
	"cannot be reached it says so on stderr (the leader is then unknown, not \"none\"); with --timeout set, it\n" +
	"gives up after the store has been unreachable that long and exits 69."

// leaderFlags are the store flags less those of a candidate (--id, --ttl,
// --renew-interval): `leader` only asks.
func leaderFlags() []cli.Flag {
	return append(withoutFlags(storeFlags(), "id", "ttl", "renew-interval"),
		&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "print every leader change until interrupted"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
		&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second,
			Usage: "how long to wait for the store; with --watch only when set: how long the store may stay unreachable before electd gives up (exit 69)"},
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
	host, _ := os.Hostname()
	// An observer holds no lease: the default timing serves.
	reach := newReachability()
	cand := elector.Candidate{Election: election, ID: "observer-" + sanitizeID(host), Logger: log, Instrument: reach}
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
		giveUp := time.Duration(0) // never
		if c.IsSet("timeout") {
			giveUp = c.Duration("timeout")
		}
		// A watch on a store that went away may just wait to reconnect
		// (etcd's does), saying nothing: a ping now and then tells.
		go reach.probe(ctx, st.Ping, pingEvery)
		err := watchLeader(ctx, el.Observe(ctx), reach, giveUp, st.Redacted(), func(l elector.Leader) error {
			return print(c.App.Writer, l)
		}, c.App.ErrWriter)
		if sig := ended(); sig != 0 {
			return nil
		}
		return err
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

// watchLeader prints each new term of the leaders ls sends (see
// health.Terms) with show, until ls closes or ctx ends. While the store
// does not answer, the leader is unknown: a "no leader" then is not shown,
// and stderr says the store cannot be reached, and again when it answers.
// With giveUp > 0, an outage that lasts giveUp ends the watch with a
// *storeUnreachableError (exit 69).
func watchLeader(ctx context.Context, ls <-chan elector.Leader, reach *reachability, giveUp time.Duration,
	storeName string, show func(elector.Leader) error, stderr io.Writer) error {
	var (
		terms   health.Terms
		pending *elector.Leader // "no leader" held back during an outage
		down    error           // the outage's last error; nil: the store answers
		timer   <-chan time.Time
	)
	for {
		select {
		case l, ok := <-ls:
			if !ok {
				if err := reach.err(); err != nil && ctx.Err() == nil {
					return &storeUnreachableError{what: "leader --watch: the watch ended", store: storeName, err: err}
				}
				return nil
			}
			if l.IsZero() && reach.err() != nil {
				pending = &l // unknown, not "none": shown if the store says so once it answers
				continue
			}
			pending = nil
			if l, ok := terms.Next(l); ok {
				if err := show(l); err != nil {
					return fmt.Errorf("write: %w", err)
				}
			}
		case <-reach.changed:
			switch err := reach.err(); {
			case err != nil && down == nil:
				down = err
				fmt.Fprintf(stderr, "electd: the store %s cannot be reached: %v; the leader is unknown, still watching\n", storeName, err)
				if giveUp > 0 {
					timer = time.After(giveUp)
				}
			case err == nil && down != nil:
				down, timer = nil, nil
				fmt.Fprintf(stderr, "electd: the store %s answers again\n", storeName)
				if pending != nil {
					if l, ok := terms.Next(*pending); ok {
						if err := show(l); err != nil {
							return fmt.Errorf("write: %w", err)
						}
					}
					pending = nil
				}
			case err != nil:
				down = err
			}
		case <-timer:
			return &storeUnreachableError{what: fmt.Sprintf("leader --watch: gave up after --timeout %s", giveUp),
				store: storeName, err: down}
		case <-ctx.Done():
			return nil
		}
	}
}

// reachability is an elector.Instrument that tells whether the store
// answers: it does not while any operation fails.
type reachability struct {
	mu      sync.Mutex
	failing map[string]error // op → its last error
	changed chan struct{}    // a value when failing may have changed
}

func newReachability() *reachability {
	return &reachability{failing: map[string]error{}, changed: make(chan struct{}, 1)}
}

// StoreError records that op fails.
func (r *reachability) StoreError(op string, err error) {
	if errors.Is(err, context.Canceled) {
		return // electd is stopping
	}
	r.mu.Lock()
	r.failing[op] = err
	r.mu.Unlock()
	r.notify()
}

// StoreAnswered records that op does not fail now.
func (r *reachability) StoreAnswered(op string) {
	r.mu.Lock()
	delete(r.failing, op)
	r.mu.Unlock()
	r.notify()
}

// pingEvery is how often `leader --watch` pings the store: an etcd watch
// whose server went away waits to reconnect without a word.
const pingEvery = 2 * time.Second

// probe pings the store every interval until ctx ends, recording the
// outcome as the operation "ping".
func (r *reachability) probe(ctx context.Context, ping func(context.Context) error, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := ping(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.StoreError("ping", err)
		default:
			r.StoreAnswered("ping")
		}
	}
}

func (r *reachability) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// err is the last error of a failing operation (the lowest op name, for a
// stable choice), or nil when none fails.
func (r *reachability) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var op string
	for o := range r.failing {
		if op == "" || o < op {
			op = o
		}
	}
	if op == "" {
		return nil
	}
	return r.failing[op]
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
