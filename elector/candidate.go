package elector

import (
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/electd/electd/clock"
)

// Candidate is one candidate in one election, as every backend takes it:
// each backend's Config embeds it beside the backend's own connection.
type Candidate struct {
	// Election names the election; its candidates share it. See Validate
	// for the rules it and ID follow.
	Election string
	// ID is this candidate's identity, what others see as the leader.
	ID string
	// Address is published with leadership (e.g. the service's URL); optional.
	Address string
	// Timing is the lease timing; zero fields take their defaults. Every
	// candidate of an election must use the same TTL.
	Timing Timing
	// Slots lets up to Slots candidates hold at once (a semaphore); 0 or 1
	// is a plain election. Every candidate of an election must agree.
	Slots int
	// Clock is the clock deadlines are kept on; nil for the real clock.
	Clock clock.Clock
	// Logger receives the backend's log; nil discards it.
	Logger *slog.Logger
	// Instrument counts store errors that are retried rather than
	// returned; nil discards them.
	Instrument Instrument
}

// Limits of the names and address of a candidate.
const (
	MaxNameLen    = 128
	MaxAddressLen = 1024
)

// Validate checks c and returns it with its defaults filled in: Timing
// through WithDefaults, Slots 1 for 0, a real clock, a discarding logger
// and instrument. It contacts nothing. Field names in its errors are the
// CLI's flags (election, id, advertise, ttl, renew-interval, slots).
//
// Names (Election and ID) are non-empty, at most MaxNameLen bytes of valid
// UTF-8, without whitespace, control characters or U+FFFD, and without
// '/', '{' or '}', and not "." or "..": they end up inside store keys (an
// etcd key prefix, a Redis Cluster hash tag) and must not escape them. The
// rule is the same for every store, so that a name that works on one works
// on all.
func (c Candidate) Validate() (Candidate, error) {
	if err := ValidateName("election", c.Election); err != nil {
		return c, err
	}
	if err := ValidateName("id", c.ID); err != nil {
		return c, err
	}
	if err := validateAddress(c.Address); err != nil {
		return c, err
	}
	if c.Slots == 0 {
		c.Slots = 1
	}
	if err := ValidateSlots(c.Slots); err != nil {
		return c, err
	}
	var err error
	if c.Timing, err = c.Timing.Checked(); err != nil {
		return c, err
	}
	c.Clock = clock.OrReal(c.Clock)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Instrument = OrNop(c.Instrument)
	return c, nil
}

// ValidateName applies the rules of election names and candidate ids (see
// Candidate.Validate); field names the option in the error.
func ValidateName(field, v string) error {
	switch {
	case v == "":
		return Configf(field, "must not be empty")
	case len(v) > MaxNameLen:
		return Configf(field, "%q… is %d bytes; the most is %d", truncate(v, 32), len(v), MaxNameLen)
	case !utf8.ValidString(v):
		return Configf(field, "%q is not valid UTF-8", v)
	case strings.ContainsAny(v, "/{}"):
		return Configf(field, "%q must not contain '/', '{' or '}' (they would leave the election's place in the store's keys)", v)
	case v == "." || v == "..":
		return Configf(field, "%q is not a valid name", v)
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return Configf(field, "%q must not contain whitespace, control characters or U+FFFD (the mark of text decoded wrongly)", v)
		}
		if unicode.Is(unicode.Cf, r) {
			// A bidi override, zero-width space or byte order mark makes a
			// name that looks like another one and is not: two deployments
			// would each have a leader.
			return Configf(field, "%+q contains the invisible format character %U; remove it (names that look alike must be the same name)", v, r)
		}
	}
	if !norm.NFC.IsNormalString(v) {
		// é precomposed (U+00E9) and decomposed (e, U+0301) look the same
		// and would be two elections.
		return Configf(field, "%+q is not in Unicode normal form C; use %+q (names that look alike must be the same name)", v, norm.NFC.String(v))
	}
	return nil
}

func validateAddress(a string) error {
	switch {
	case len(a) > MaxAddressLen:
		return Configf("advertise", "is %d bytes; the most is %d", len(a), MaxAddressLen)
	case !utf8.ValidString(a):
		return Configf("advertise", "is not valid UTF-8")
	}
	for _, r := range a {
		if unicode.IsControl(r) {
			return Configf("advertise", "contains the control character %U", r)
		}
	}
	return nil
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
