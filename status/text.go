package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/leaderwatch"
)

// WriteText writes r as `electd status` shows it, e.g.
//
//	election  nightly   store etcd://h1:2379 (reachable)   slots 1
//	term      node-1 token=41 since 2026-12-06T23:00:00Z (age 5m3s)
//	queue     3 candidates, in order of arrival
//	  #  ID      STATE    TOKEN  ADDRESS         ARRIVED  EXPIRES
//	  1  node-1  holder   41     http://h1:8080  -        -
//	  2  node-2  waiting  44     http://h2:8080  -        -
//	  3  node-3  waiting  45     http://h3:8080  -        -
//	last run  none
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	reach := "reachable"
	if !r.Store.Reachable {
		reach = "NOT reachable: " + r.Store.Error
	}
	fmt.Fprintf(&b, "election  %s   store %s (%s)   slots %d\n", esc(r.Election), r.Store.URL, reach, r.Slots)
	if !r.Store.Reachable {
		_, err := io.WriteString(w, b.String())
		return err
	}
	if r.Agreement != "" {
		fmt.Fprintf(&b, "quorum    %s\n", r.Agreement)
	}
	switch {
	case len(r.Holders) == 0:
		b.WriteString("term      none: nobody holds\n")
	default:
		for _, h := range r.Holders {
			fmt.Fprintf(&b, "term      %s token=%d since %s (age %s)\n", esc(h.ID), h.FencingToken, stamp(h.Since),
				age(h))
		}
	}
	fmt.Fprintf(&b, "queue     %d candidate(s), in order of arrival\n", len(r.Queue))
	if len(r.Queue) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tID\tSTATE\tTOKEN\tADDRESS\tARRIVED\tEXPIRES")
		for i, c := range r.Queue {
			state, token := "waiting", "-"
			if c.Holder {
				state = "holder"
			}
			if c.Token != 0 {
				token = fmt.Sprint(c.Token)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, esc(c.ID), state, token, orDash(esc(c.Address)),
				stamp(c.Arrived), expires(c, r.At))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.LastRun == nil {
		b.WriteString("last run  none\n")
	} else {
		lr := r.LastRun
		fmt.Fprintf(&b, "last run  %s token=%d finished %s, expires %s (in %s)\n", esc(lr.ID), lr.Token,
			stamp(lr.Finished), stamp(lr.Expires), seconds(lr.ExpiresInSeconds))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func esc(s string) string { return leaderwatch.EscapeText(s) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// stamp is t in UTC, to the second; "-" when unknown.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond)
}

func age(h Held) string {
	if h.Since.IsZero() {
		return "unknown"
	}
	return seconds(h.AgeSeconds).String()
}

// expires is when c's lease lapses, relative to the reading; "-" when the
// store does not say.
func expires(c elector.Queued, at time.Time) string {
	if c.Expires.IsZero() {
		return "-"
	}
	d := c.Expires.Sub(at).Round(100 * time.Millisecond)
	if d < 0 {
		return fmt.Sprintf("lapsed %s ago", -d)
	}
	return "in " + d.String()
}
