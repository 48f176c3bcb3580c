package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/status"
)

// statusHelp is the description of `electd status`.
const statusHelp = "Prints the line of --election: every candidate in order of arrival (id, address, arrival time where the\n" +
	"store records it, fencing token), the holder of every slot with its term's token and age, the --once-per run\n" +
	"record and when it expires, and whether the store answers. It asks the store and writes nothing.\n" +
	"Exit status 0 when the store answered, 69 when it did not within --timeout (the report says so), 1 on\n" +
	"another failure. GET /status on every `electd run` serves the same JSON."

// statusFlags are leader's less --watch.
func statusFlags() []cli.Flag {
	return append(withoutFlags(storeFlags(), "id", "ttl", "renew-interval"),
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
		&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "how long to wait for the store (exit 69 when it does not answer)"},
	)
}

func statusAction(c *cli.Context, log *slog.Logger) error {
	election, err := requireElection(c)
	if err != nil {
		return err
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return elector.Configf("output", "%q is not one of text, json", format)
	}
	if c.Args().Present() {
		return usagef("status takes no arguments, got %q", c.Args().Slice())
	}
	host, _ := os.Hostname()
	cand := elector.Candidate{Election: election, ID: "observer-" + sanitizeID(host), Logger: log}
	if _, err := cand.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(c.Context, c.Duration("timeout"), errStatusTimeout)
	defer cancel()
	st, el, done, err := openCandidate(ctx, c, log, cand)
	if err != nil {
		return err
	}
	defer done()
	src, ok := el.(status.Source)
	if !ok {
		return fmt.Errorf("the store %s cannot show an election's line", st.Redacted())
	}
	rep, rerr := status.Reader{Election: election, Source: src, StoreURL: st.Redacted(), Ping: st.Ping}.Read(ctx)
	if rep.Line == nil && rep.Store.Reachable {
		return rerr // neither reachable nor unreachable: a refusal
	}
	if format == "json" {
		err = json.NewEncoder(c.App.Writer).Encode(rep)
	} else {
		err = rep.WriteText(c.App.Writer)
	}
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return rerr
}

// errStatusTimeout is the cause of the end of `electd status`'s --timeout.
var errStatusTimeout = errors.New("--timeout expired")
