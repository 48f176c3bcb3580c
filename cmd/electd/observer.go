package main

import (
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
)

// observerArgs checks the flags and arguments that `leader` and `status`
// (cmd, for messages) share: --election, --output (json: true when it is
// json) and none positional. It returns the candidate they ask as, which
// never campaigns, named after the host; in counts its retried store
// errors (nil: none counted).
func observerArgs(c *cli.Context, log *slog.Logger, cmd string, in elector.Instrument) (cand elector.Candidate, json bool, err error) {
	election, err := requireElection(c)
	if err != nil {
		return cand, false, err
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return cand, false, elector.Configf("output", "%q is not one of text, json", format)
	}
	if c.Args().Present() {
		return cand, false, usagef("%s takes no arguments, got %q", cmd, c.Args().Slice())
	}
	host, _ := os.Hostname()
	// An observer holds no lease: the default timing serves.
	cand = elector.Candidate{Election: election, ID: "observer-" + sanitizeID(host), Logger: log, Instrument: in}
	if _, err := cand.Validate(); err != nil {
		return elector.Candidate{}, false, err
	}
	return cand, format == "json", nil
}
