package main

import (
	"os"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/health"
)

// adminTokenOf reads the admin token from --admin-token (or
// $ELECTD_ADMIN_TOKEN) or --admin-token-file, one of them; "" for none.
// health.Config.CheckSettings checks a token given directly; a token from
// a file is checked here, so that errors name the file's flag.
func adminTokenOf(c *cli.Context) (string, error) {
	f := c.String("admin-token-file")
	if f == "" {
		return c.String("admin-token"), nil
	}
	if c.String("admin-token") != "" {
		return "", elector.Configf("admin-token-file", "and --admin-token (or $ELECTD_ADMIN_TOKEN) are both set; give the token in one place only")
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", elector.Configf("admin-token-file", "cannot read it: %v", err)
	}
	token := strings.TrimRight(string(b), "\r\n")
	if n := utf8.RuneCountInString(token); n < health.MinAdminTokenLen {
		return "", elector.Configf("admin-token-file", "%s holds %d characters; use at least %d random ones (e.g. openssl rand -hex 16 > %s)",
			f, n, health.MinAdminTokenLen, f)
	}
	return token, nil
}
