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

const switchoverHelp = `Asks the leader's electd (POST /resign?to=ID at --url) to stop its child's
tree and then hand its term to the queued candidate --to names, in one store
operation, with a greater token; the candidates ahead of it stay queued.
Refused, changing nothing, when that copy does not lead (the answer names the
leader) or no such candidate is queued. Exit 0 handed over, 1 refused or
failed, 2 bad usage.`

func switchoverFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "to", Usage: "the --id of the queued candidate to hand the term to (required)"},
		&cli.StringFlag{Name: "url", EnvVars: env("URL"), Value: "http://127.0.0.1:4040", Usage: "the leader's electd: its --listen (or --admin-listen) address"},
		&cli.StringFlag{Name: "admin-token", EnvVars: env("ADMIN_TOKEN"), Usage: "its admin token, needed from another host (prefer $ELECTD_ADMIN_TOKEN or --admin-token-file)"},
		&cli.StringFlag{Name: "admin-token-file", EnvVars: env("ADMIN_TOKEN_FILE"), Usage: "file holding the admin token"},
		&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up waiting for the answer after this long"},
	}
}

func switchoverAction(c *cli.Context) error {
	if c.String("to") == "" {
		return usagef("switchover needs --to ID: the --id of a queued candidate")
	}
	token, err := adminTokenOf(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	if err := health.RequestSwitchover(ctx, http.DefaultClient, c.String("url"), token, c.String("to")); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.Writer, "handed the term to %s\n", c.String("to"))
	return err
}

// switchoverOn is the supervisor's ResignTo for POST /resign?to=ID, naming
// the store's scheme where its backend cannot hand over.
func switchoverOn(sup *supervisor.Supervisor, st *store.Store) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		err := sup.ResignTo(ctx, id)
		if scheme, _, _ := strings.Cut(st.Redacted(), "://"); errors.Is(err, elector.ErrNoSwitchover) {
			return fmt.Errorf("switchover is not supported on %s:// yet; use POST /resign: %w", scheme, err)
		}
		return err
	}
}
