package store

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend/hosts"
)

const redactedMark = "REDACTED"

// redact hides the credentials of a store URL for logs and errors. A user
// name is kept when the URL parses cleanly; anything between "://" and the
// last "@" is hidden otherwise (a password with an unescaped '/', '?' or
// '#' does not parse as one). Query strings, where some clients accept a
// password, are hidden too.
func redact(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + 3
	}
	at := strings.LastIndex(raw, "@")
	hostList, placeheld := hosts.SplitList(raw) // net/url takes one host
	u, err := url.Parse(placeheld)
	clean := err == nil && (at < start || (u.User != nil &&
		!strings.ContainsAny(u.Path+u.RawPath+u.RawQuery+u.Fragment, "@")))
	if !clean {
		if at < start {
			return redactQuery(raw)
		}
		return raw[:start] + redactedMark + redactQuery(raw[at:])
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redactedMark)
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = redactedMark, false
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = redactedMark, ""
	}
	out := strings.Replace(u.String(), hosts.Placeholder, hostList, 1)
	if start > 0 && !strings.Contains(out, "://") {
		// net/url drops the "//" of an empty authority (k8s://): keep it.
		out = strings.Replace(out, ":", "://", 1)
	}
	return out
}

// redactQuery hides what follows the first '?' or '#'.
func redactQuery(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		return s[:i+1] + redactedMark
	}
	return s
}

// secrets are strings that must never be printed: the store password, in
// the forms a library might echo it.
type secrets []string

// newSecrets returns the forms of password worth hiding: as given, and as
// escaped in a URL's user info or query. Passwords shorter than 4 bytes are
// hidden too, at the cost of some over-redaction.
func newSecrets(passwords ...string) secrets {
	var s secrets
	for _, password := range passwords {
		if password == "" {
			continue
		}
		s = append(s, password)
		for _, f := range []string{url.PathEscape(password), url.QueryEscape(password),
			strings.TrimPrefix(url.UserPassword("u", password).String(), "u:")} {
			if f != password {
				s = append(s, f)
			}
		}
	}
	return s
}

// scrub replaces every secret in s by REDACTED.
func (ss secrets) scrub(s string) string {
	for _, x := range ss {
		s = strings.ReplaceAll(s, x, redactedMark)
	}
	return s
}

// err returns err with every secret hidden from its message; errors.Is and
// errors.As still see the original chain.
func (ss secrets) err(err error) error {
	if err == nil || len(ss) == 0 {
		return err
	}
	msg := err.Error()
	clean := ss.scrub(msg)
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// logger returns log with every secret hidden from messages and attributes.
func (ss secrets) logger(log *slog.Logger) *slog.Logger {
	if log == nil || len(ss) == 0 {
		return log
	}
	return slog.New(&scrubHandler{h: log.Handler(), ss: ss})
}

// scrubHandler hides secrets in the records it passes on.
type scrubHandler struct {
	h  slog.Handler
	ss secrets
}

func (h *scrubHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.ss.scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *scrubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &scrubHandler{h: h.h.WithAttrs(clean), ss: h.ss}
}

func (h *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{h: h.h.WithGroup(name), ss: h.ss}
}

func (h *scrubHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.ss.scrub(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = h.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.Any(a.Key, h.ss.err(err))
		}
		return slog.String(a.Key, h.ss.scrub(v.String()))
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}

// leaks reports whether s holds a secret.
func (ss secrets) leaks(s string) bool {
	for _, x := range ss {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// scrubbedInstrument passes an elector's store errors on to in with every
// secret hidden (the chain is kept: see scrubbedError).
type scrubbedInstrument struct {
	in elector.Instrument
	ss secrets
}

func (i scrubbedInstrument) StoreError(op string, err error) { i.in.StoreError(op, i.ss.err(err)) }
func (i scrubbedInstrument) StoreAnswered(op string)         { i.in.StoreAnswered(op) }
func (i scrubbedInstrument) Renewed(took time.Duration)      { i.in.Renewed(took) }
