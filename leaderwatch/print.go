package leaderwatch

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/electd/electd/elector"
)

// Printer writes a leader as `electd leader` shows it: one line of text,
// or one JSON object {"election","leader"} with "leader":null for none.
type Printer struct {
	Election string
	JSON     bool
	W        io.Writer
}

type printed struct {
	Election string          `json:"election"`
	Leader   *elector.Leader `json:"leader"`
}

// Print writes l (the zero Leader: "no leader").
func (p Printer) Print(l elector.Leader) error {
	if p.JSON {
		out := printed{Election: p.Election}
		if !l.IsZero() {
			out.Leader = &l
		}
		return json.NewEncoder(p.W).Encode(out)
	}
	if l.IsZero() {
		_, err := fmt.Fprintf(p.W, "%s: no leader\n", p.Election)
		return err
	}
	// The id and address are text from the store: escaped, they can
	// neither forge lines nor drive the terminal.
	address := l.Address
	if address == "" {
		address = "-"
	}
	_, err := fmt.Fprintf(p.W, "%s: %s token=%d address=%s since=%s\n", p.Election, EscapeText(l.ID), l.Token,
		EscapeText(address), l.Since.UTC().Format(time.RFC3339))
	return err
}

// EscapeText escapes what a terminal would act on or not show: control
// characters (ESC, BEL, CR, LF…), invisible format characters (bidi
// overrides, zero-width spaces) and invalid UTF-8, in Go's notation
// (\x1b, \r, \u202e).
func EscapeText(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case !strconv.IsPrint(r): // controls, format characters, unassigned
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
