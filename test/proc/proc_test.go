package proc

import (
	"slices"
	"testing"
)

func TestCrashes(t *testing.T) {
	tests := []struct {
		name   string
		output string
		want   []string
	}{
		{name: "clean", output: "level=INFO msg=elected\n"},
		{name: "race", output: "==================\nWARNING: DATA RACE\nWrite at 0x00c000\n", want: []string{"WARNING: DATA RACE"}},
		{name: "panic and fatal", output: "panic: boom\n\nfatal error: all goroutines are asleep\n", want: []string{"panic: ", "fatal error: "}},
		{name: "once each", output: "panic: a\npanic: b\n", want: []string{"panic: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Crashes(tt.output); !slices.Equal(got, tt.want) {
				t.Fatalf("Crashes = %q, want %q", got, tt.want)
			}
		})
	}
}
