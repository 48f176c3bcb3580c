package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
)

// observer is what `electd leader` and `electd status` ask as: a candidate
// that never campaigns, named after the host.
type observer struct {
	election string
	json     bool // --output json
	cand     elector.Candidate
}

// observerArgs checks the flags and arguments that `leader` and `status`
// (cmd, for messages) share: --election, --output and none positional; in
// counts the observer's retried store errors (nil: none counted).
func observerArgs(c *cli.Context, log *slog.Logger, cmd string, in elector.Instrument) (observer, error) {
	election, err := requireElection(c)
	if err != nil {
		return observer{}, err
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return observer{}, elector.Configf("output", "%q is not one of text, json", format)
	}
	if c.Args().Present() {
		return observer{}, usagef("%s takes no arguments, got %q", cmd, c.Args().Slice())
	}
	host, _ := os.Hostname()
	// An observer holds no lease: the default timing serves.
	cand := elector.Candidate{Election: election, ID: "observer-" + sanitizeID(host), Logger: log, Instrument: in}
	if _, err := cand.Validate(); err != nil {
		return observer{}, err
	}
	return observer{election: election, json: format == "json", cand: cand}, nil
}

// open opens --store and makes the observer on it, like openCandidate;
// giveUp is how long the command waits for an unreachable store (0: until
// it answers).
func (o observer) open(ctx context.Context, c *cli.Context, log *slog.Logger, giveUp time.Duration) (*store.Store, elector.Locker, func(), error) {
	opts := storeOptions(c)
	opts.GiveUp = giveUp
	return openCandidateWith(ctx, opts, log, o.cand)
}
