package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
	"github.com/electd/electd/supervisor"
)

// storeOptions reads the store flags (storeFlags, secretFlags, tlsFlags).
func storeOptions(c *cli.Context) store.Options {
	o := store.Options{
		URL:          c.String("store"),
		Password:     os.Getenv("ELECTD_STORE_PASSWORD"),
		PasswordFile: c.String("store-password-file"),
		Secrets:      map[string]store.SecretInput{},
		CAFile:       c.String("ca-file"),
		CertFile:     c.String("cert-file"),
		KeyFile:      c.String("key-file"),
		ServerName:   c.String("tls-server-name"),
	}
	for _, s := range store.SecretFlags() {
		o.Secrets[s.Name] = store.SecretInput{Value: os.Getenv(s.Env), File: c.String(s.Flag)}
	}
	return o
}

// openCandidate opens --store and makes cand on it; done closes both,
// logging what fails. Call it after every flag is checked: it is the first
// thing that touches the network. ctx bounds the opening only (a login
// that the store does not answer), not the store's life.
func openCandidate(ctx context.Context, c *cli.Context, log *slog.Logger, cand elector.Candidate) (st *store.Store, el elector.Locker, done func(), err error) {
	return openCandidateWith(ctx, storeOptions(c), log, cand)
}

// openCandidateWith is openCandidate with the store options given.
func openCandidateWith(ctx context.Context, o store.Options, log *slog.Logger, cand elector.Candidate) (st *store.Store, el elector.Locker, done func(), err error) {
	if st, err = store.Open(ctx, o, log); err != nil {
		return nil, nil, nil, err
	}
	closeStore := func() {
		if err := st.Close(); err != nil {
			log.Warn("closing the store connection", "err", err)
		}
	}
	if el, err = st.NewElector(cand); err != nil {
		closeStore()
		return nil, nil, nil, err
	}
	return st, el, func() {
		if err := el.Close(); err != nil {
			log.Warn("closing the elector", "err", err)
		}
		closeStore()
	}, nil
}

// newSupervisor makes the supervisor of `run` or `lock`, makes electd the
// subreaper of the child's orphans, and logs the containment in force.
func newSupervisor(log *slog.Logger, cfg supervisor.Config) (*supervisor.Supervisor, error) {
	sup, err := supervisor.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := supervisor.BecomeSubreaper(); err != nil {
		log.Warn("cannot become child subreaper; orphaned grandchildren will go to init", "err", err)
	}
	mode, why := sup.Containment()
	log.Info("containment", "mode", mode, "why", why)
	return sup, nil
}
