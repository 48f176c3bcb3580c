package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/leaderwatch"
	"github.com/electd/electd/status"
	"github.com/electd/electd/store"
)

// leaderHelp is the description of `electd leader`.
const leaderHelp = "Prints the current leader of --election. Exit status 0 when there is one, 3 when there is none,\n" +
	"69 when the store does not answer within --timeout.\n" +
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

func leaderAction(c *cli.Context, log *slog.Logger) error {
	reach := leaderwatch.NewReachability()
	cand, asJSON, err := observerArgs(c, log, "leader", reach)
	if err != nil {
		return err
	}
	election := cand.Election
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
	shown := "named by --store" // the store as messages show it, once opened: redacted
	failed := func(err error) error {
		if sig := ended(); sig != 0 {
			if c.Bool("watch") {
				return nil
			}
			return &signalError{sig: sig}
		}
		if errors.Is(context.Cause(ctx), errLeaderTimeout) {
			return &store.UnreachableError{What: fmt.Sprintf("leader %s: no answer within --timeout %s", election, c.Duration("timeout")),
				Store: shown, Err: err}
		}
		return err
	}
	opts := storeOptions(c)
	opts.GiveUp = c.Duration("timeout") // without --watch: the question's deadline
	if c.Bool("watch") && !c.IsSet("timeout") {
		opts.GiveUp = 0 // never
	}
	st, el, done, err := openCandidateWith(ctx, opts, log, cand)
	if err != nil {
		return failed(err)
	}
	defer done()
	shown = st.Redacted()
	printer := leaderwatch.Printer{Election: election, JSON: asJSON, W: c.App.Writer}
	print := printer.Print

	if c.Bool("watch") {
		// A watch on a store that went away may just wait to reconnect
		// (etcd's does), saying nothing: a ping now and then tells.
		go reach.Probe(ctx, st.Ping, leaderwatch.PingEvery)
		err := leaderwatch.Watch{Leaders: el.Observe(ctx), Reach: reach, GiveUp: opts.GiveUp, Store: st.Redacted(),
			Show: print, Notices: c.App.ErrWriter}.Run(ctx)
		if sig := ended(); sig != 0 {
			return nil
		}
		return err
	}
	l, err := el.Leader(ctx)
	switch {
	case errors.Is(err, elector.ErrNoLeader):
		if err := print(elector.Leader{}); err != nil {
			return err
		}
		return errNoLeader
	case err != nil:
		var se *elector.StoreError
		if ended() != 0 || errors.As(err, &se) && se.Permanent {
			return failed(fmt.Errorf("ask %s for the leader: %w", st.Redacted(), err))
		}
		return &store.UnreachableError{What: "leader " + election, Store: st.Redacted(), Err: err}
	}
	holders, err := status.Holders(ctx, el)
	if err != nil {
		log.Warn("cannot read the election's line: showing the leader alone, not every holder of a semaphore", "err", err)
	}
	return printer.PrintHolders(l, holders)
}

// errLeaderTimeout is the cause of the end of `electd leader`'s --timeout.
var errLeaderTimeout = errors.New("--timeout expired")

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
