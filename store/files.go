package store

import (
	"log/slog"
	"os"
)

// warnReadableByAll warns when the secret file given by --flag may be read
// by every user of this host: electd still uses it (a mounted secret's mode
// is not always the operator's to choose), but says how to fix it.
func warnReadableByAll(log *slog.Logger, flag, path string) {
	if path == "" {
		return
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		return
	}
	log.Warn("--"+flag+" is readable by every user of this host; make it readable by electd's user only (chmod 600 or 640)",
		"file", path, "mode", fi.Mode().Perm().String())
}
