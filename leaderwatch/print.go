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

// Printer writes a leader as `electd leader` shows it: one line of text
// per holder, or one JSON object {"election","leader","holders"} with
// "leader":null and "holders":[] for none.
type Printer struct {
	Election string
	JSON     bool
	W        io.Writer
}

type printed struct {
	Election string           `json:"election"`
	Leader   *elector.Leader  `json:"leader"`
	Holders  []elector.Leader `json:"holders"`
}

// Print writes l (the zero Leader: "no leader") as the only holder.
func (p Printer) Print(l elector.Leader) error { return p.PrintHolders(l, nil) }

// PrintHolders writes l and every holder of a semaphore, first the leader
// (nil or empty holders: l is the only one).
func (p Printer) PrintHolders(l elector.Leader, holders []elector.Leader) error {
	if len(holders) == 0 && !l.IsZero() {
		holders = []elector.Leader{l}
	}
	if p.JSON {
		out := printed{Election: p.Election, Holders: []elector.Leader{}}
		if !l.IsZero() {
			out.Leader, out.Holders = &l, holders
		}
		return json.NewEncoder(p.W).Encode(out)
	}
	if l.IsZero() {
		_, err := fmt.Fprintf(p.W, "%s: no leader\n", p.Election)
		return err
	}
	for _, h := range holders {
		// The id and address are text from the store: escaped, they can
		// neither forge lines nor drive the terminal.
		address := h.Address
		if address == "" {
			address = "-"
		}
		if _, err := fmt.Fprintf(p.W, "%s: %s token=%d address=%s since=%s\n", p.Election, EscapeText(h.ID), h.Token,
			EscapeText(address), h.Since.UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	}
	return nil
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
