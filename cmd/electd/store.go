package main

import (
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/store"
)

// storeOptions reads the store flags (storeFlags, tlsFlags).
func storeOptions(c *cli.Context) store.Options {
	return store.Options{
		URL:          c.String("store"),
		Password:     os.Getenv("ELECTD_STORE_PASSWORD"),
		PasswordFile: c.String("store-password-file"),
		CAFile:       c.String("ca-file"),
		CertFile:     c.String("cert-file"),
		KeyFile:      c.String("key-file"),
		ServerName:   c.String("tls-server-name"),
	}
}

// openStore opens --store. Call it after every flag is checked: it is the
// first thing that touches the network.
func openStore(c *cli.Context, log *slog.Logger) (*store.Store, error) {
	return store.Open(c.Context, storeOptions(c), log)
}
