package rediskit

import (
	"fmt"
	"strconv"
	"time"

	"github.com/electd/electd/elector"
)

// View is a decoded leader view: a view script's reply, or the payload of
// an election message after its first line. Each backend's Lua writes it
// (its viewLua); both decode it here. OK is false when it names no leader.
type View struct {
	At          time.Time // the server time the view was read at
	OK          bool
	ID, Address string
	Token       uint64
	Since       time.Time
	Remaining   time.Duration
}

// Leader is the leader the view names, or the zero Leader.
func (r View) Leader() elector.Leader {
	if !r.OK {
		return elector.Leader{}
	}
	return elector.Leader{ID: r.ID, Address: r.Address, Token: r.Token, Since: r.Since}
}

// ParseView decodes a script's reply of view fields (see ParseViewFields),
// strings or integers.
func ParseView(v any) (View, error) {
	a, ok := v.([]any)
	if !ok {
		return View{}, fmt.Errorf("unexpected script reply %#v", v)
	}
	f := make([]string, len(a))
	for i, x := range a {
		switch x := x.(type) {
		case string:
			f[i] = x
		case int64:
			f[i] = strconv.FormatInt(x, 10)
		default:
			return View{}, fmt.Errorf("unexpected script reply %#v", v)
		}
	}
	return ParseViewFields(f)
}

// ParseViewFields decodes {now µs} or {now µs, id, address, token, since µs,
// remaining ms}.
func ParseViewFields(f []string) (View, error) {
	var r View
	if len(f) != 1 && len(f) != 6 {
		return r, fmt.Errorf("leader view has %d fields, want 1 or 6", len(f))
	}
	at, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return r, fmt.Errorf("bad time in leader view: %w", err)
	}
	r.At = time.UnixMicro(at)
	if len(f) == 1 {
		return r, nil
	}
	r.OK, r.ID, r.Address = true, f[1], f[2]
	if r.Token, err = strconv.ParseUint(f[3], 10, 64); err != nil {
		return r, fmt.Errorf("bad token in leader view: %w", err)
	}
	us, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		return r, fmt.Errorf("bad since in leader view: %w", err)
	}
	r.Since = time.UnixMicro(us)
	ms, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil {
		return r, fmt.Errorf("bad remaining time in leader view: %w", err)
	}
	r.Remaining = time.Duration(ms) * time.Millisecond
	return r, nil
}

// ParseUint decodes a script's reply field that holds an unsigned integer
// as a string.
func ParseUint(v any) (uint64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("not a string: %#v", v)
	}
	return strconv.ParseUint(s, 10, 64)
}
