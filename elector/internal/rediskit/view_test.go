package rediskit

import (
	"strings"
	"testing"
	"time"
)

func TestParseViewFields(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    View
		wantErr string
	}{
		{name: "no leader", payload: "1700000000000001",
			want: View{At: time.UnixMicro(1700000000000001)}},
		{name: "leader", payload: "1700000000000001\na\nhttp://a:4040\n42\n1699999999000000\n1500",
			want: View{At: time.UnixMicro(1700000000000001), OK: true, ID: "a", Address: "http://a:4040",
				Token: 42, Since: time.UnixMicro(1699999999000000), Remaining: 1500 * time.Millisecond}},
		{name: "no address", payload: "1\na\n\n7\n2\n0",
			want: View{At: time.UnixMicro(1), OK: true, ID: "a", Token: 7, Since: time.UnixMicro(2)}},
		{name: "too few fields", payload: "1\na\nb", wantErr: "3 fields, want 1 or 6"},
		{name: "bad time", payload: "x", wantErr: "bad time"},
		{name: "bad token", payload: "1\na\n\n-1\n2\n3", wantErr: "bad token"},
		{name: "bad since", payload: "1\na\n\n1\nnow\n3", wantErr: "bad since"},
		{name: "bad remaining", payload: "1\na\n\n1\n2\n1.5", wantErr: "bad remaining"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseViewFields(strings.Split(tt.payload, "\n"))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.At.Equal(tt.want.At) || !got.Since.Equal(tt.want.Since) || got.OK != tt.want.OK ||
				got.ID != tt.want.ID || got.Address != tt.want.Address || got.Token != tt.want.Token ||
				got.Remaining != tt.want.Remaining {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
