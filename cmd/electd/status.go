package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/status"
)

// statusHelp is the description of `electd status`.
const statusHelp = "Prints the queue of --election in order of arrival (id, address, arrival time where the store records it,\n" +
	"token), the holder of every slot with its term's token and age, the --once-per run record and its expiry, and\n" +
	"whether the store answers; it does not touch the election. Exit 0; 69 when the store does not answer within\n" +
	"--timeout (the report says so); 1 on another failure. GET /status on `electd run` serves the same JSON."

// statusFlags are leader's less --watch.
func statusFlags() []cli.Flag {
	return append(withoutFlags(storeFlags(), "id", "ttl", "renew-interval"),
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
		&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "how long to wait for the store (exit 69 when it does not answer)"},
	)
}

func statusAction(c *cli.Context, log *slog.Logger) error {
	cand, asJSON, err := observerArgs(c, log, "status", nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(c.Context, c.Duration("timeout"), errLeaderTimeout)
	defer cancel()
	opts := storeOptions(c)
	opts.GiveUp = c.Duration("timeout")
	st, el, done, err := openCandidateWith(ctx, opts, log, cand)
	if err != nil {
		return err
	}
	defer done()
	reader, err := status.NewReader(cand.Election, el, st)
	if err != nil {
		return err
	}
	rep, rerr := reader.Read(ctx)
	if rep.Queue == nil && rep.Store.Reachable {
		return rerr // the store refused: no report
	}
	if err := rep.Write(c.App.Writer, asJSON); err != nil {
		return err
	}
	return rerr
}

// statusEndpoint and holdersEndpoint serve GET /status and /leader's
// holders of `electd run`.
var statusEndpoint, holdersEndpoint = status.Endpoint, status.HoldersEndpoint
