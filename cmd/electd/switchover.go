package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/health"
	"github.com/electd/electd/store"
	"github.com/electd/electd/supervisor"
)

const switchoverHelp = `Asks the leader's electd (POST /resign?to=ID on its --listen address) to
hand its term to the candidate --to names, like patronictl switchover
--candidate: the leader stops its child's whole tree, then the store makes
that candidate the next leader in one operation, with a greater fencing
token; the candidates queued ahead of it stay queued, after it.

It is refused, and nothing changes, when the copy at --url does not lead
(the answer names the leader: run it there), when no candidate with that
--id is queued, or when the store cannot do it (redlock://: use
POST /resign). From loopback no token is needed unless that electd runs
with --admin-token-required; from elsewhere give its admin token.

Exit codes: 0 handed over; 1 refused or failed (the message says why);
2 bad usage.`

func switchoverFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "to", Usage: "the --id of the queued candidate to hand the term to (required)"},
		&cli.StringFlag{Name: "url", EnvVars: env("URL"), Value: "http://127.0.0.1:4040",
			Usage: "the leader's electd: its --listen (or --admin-listen) address"},
		&cli.StringFlag{Name: "admin-token", EnvVars: env("ADMIN_TOKEN"),
			Usage: "that electd's admin token (as a flag it shows in ps: prefer $ELECTD_ADMIN_TOKEN or --admin-token-file)"},
		&cli.StringFlag{Name: "admin-token-file", EnvVars: env("ADMIN_TOKEN_FILE"), Usage: "file holding the admin token"},
		&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up waiting for the answer after this long"},
	}
}

func switchoverAction(c *cli.Context) error {
	to := c.String("to")
	if to == "" {
		return usagef("switchover needs --to ID: the --id of a queued candidate")
	}
	token, err := adminTokenOf(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	if err := health.RequestSwitchover(ctx, http.DefaultClient, c.String("url"), token, to); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "handed the term to %s\n", to)
	return nil
}

// switchoverOn is the supervisor's ResignTo for POST /resign?to=ID, with a
// refusal that names the store's scheme where its backend cannot do it.
func switchoverOn(sup *supervisor.Supervisor, st *store.Store) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		err := sup.ResignTo(ctx, id)
		if errors.Is(err, elector.ErrNoSwitchover) {
			scheme, _, _ := strings.Cut(st.Redacted(), "://")
			return fmt.Errorf("switchover is not supported on %s:// yet; use POST /resign: %w", scheme, err)
		}
		return err
	}
}
