package rediskit

import (
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name    string
		f       []string
		wantErr bool
		want    Line
	}{
		{name: "empty", f: []string{"1000", ""}, want: Line{At: time.UnixMicro(1000)}},
		{name: "holder and waiter", f: []string{"1000", "2", "a#1", "1", "a", "http://a", "5000", "7", "900", "b#2", "2", "b", "", "6000", "", ""},
			want: Line{At: time.UnixMicro(1000), Slots: 2, Entries: []Entry{
				{Entry: "a#1", ID: "a", Address: "http://a", Order: 1, Deadline: time.UnixMicro(5000), Token: 7, Since: time.UnixMicro(900)},
				{Entry: "b#2", ID: "b", Order: 2, Deadline: time.UnixMicro(6000)}}}},
		{name: "short", f: []string{"1000"}, wantErr: true},
		{name: "ragged", f: []string{"1000", "", "a#1", "1"}, wantErr: true},
		{name: "bad token", f: []string{"1000", "", "a#1", "1", "a", "", "5000", "x", ""}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLine(tc.f)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseLine(%q) error %v, want error %v", tc.f, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if !got.At.Equal(tc.want.At) || got.Slots != tc.want.Slots || len(got.Entries) != len(tc.want.Entries) {
				t.Fatalf("parseLine = %+v, want %+v", got, tc.want)
			}
			for i, e := range got.Entries {
				w := tc.want.Entries[i]
				if e.Entry != w.Entry || e.ID != w.ID || e.Address != w.Address || e.Order != w.Order || !e.Deadline.Equal(w.Deadline) ||
					e.Token != w.Token || !e.Since.Equal(w.Since) {
					t.Fatalf("entry %d = %+v, want %+v", i, e, w)
				}
			}
		})
	}
}
