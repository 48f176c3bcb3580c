package elector_test

import (
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

func TestLeaderSameTermAndEqual(t *testing.T) {
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a1 := elector.Leader{ID: "a", Address: "http://a:8080", Token: 1, Since: since}
	with := func(f func(*elector.Leader)) elector.Leader { l := a1; f(&l); return l }
	tests := []struct {
		name     string
		a, b     elector.Leader
		sameTerm bool
		equal    bool
	}{
		{name: "identical", a: a1, b: a1, sameTerm: true, equal: true},
		{name: "since refined", a: a1, b: with(func(l *elector.Leader) { l.Since = since.Add(time.Millisecond) }), sameTerm: true},
		{name: "since unknown", a: a1, b: with(func(l *elector.Leader) { l.Since = time.Time{} }), sameTerm: true},
		{name: "same instant elsewhere", a: a1, b: with(func(l *elector.Leader) { l.Since = since.In(time.FixedZone("CET", 3600)) }), sameTerm: true, equal: true},
		{name: "address moved", a: a1, b: with(func(l *elector.Leader) { l.Address = "http://a:9090" }), sameTerm: true},
		{name: "next token same holder", a: a1, b: with(func(l *elector.Leader) { l.Token = 2 }), sameTerm: false},
		{name: "other holder same token", a: a1, b: with(func(l *elector.Leader) { l.ID = "b" }), sameTerm: false},
		{name: "none and none", a: elector.Leader{}, b: elector.Leader{}, sameTerm: true, equal: true},
		{name: "leader and none", a: a1, b: elector.Leader{}, sameTerm: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, p := range [][2]elector.Leader{{tt.a, tt.b}, {tt.b, tt.a}} {
				if got := p[0].SameTerm(p[1]); got != tt.sameTerm {
					t.Errorf("%+v.SameTerm(%+v) = %v, want %v", p[0], p[1], got, tt.sameTerm)
				}
				if got := p[0].Equal(p[1]); got != tt.equal {
					t.Errorf("%+v.Equal(%+v) = %v, want %v", p[0], p[1], got, tt.equal)
				}
			}
		})
	}
}
