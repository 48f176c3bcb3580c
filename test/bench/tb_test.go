package main

import (
	"context"
	"strings"
	"testing"
)

// withTB turns a Fatalf into the error, runs every cleanup last first, and
// reports an Errorf made before f returned.
func TestWithTB(t *testing.T) {
	var order []string
	err := withTB(context.Background(), "x", t.TempDir(), func(tb *benchTB) error {
		tb.Cleanup(func() { order = append(order, "first") })
		tb.Cleanup(func() { order = append(order, "second") })
		tb.Fatalf("boom %d", 1)
		order = append(order, "after Fatalf")
		return nil
	})
	if err == nil || err.Error() != "boom 1" {
		t.Fatalf("err = %v, want boom 1", err)
	}
	if got := strings.Join(order, ","); got != "second,first" {
		t.Fatalf("order %q, want second,first", got)
	}
	err = withTB(context.Background(), "y", t.TempDir(), func(tb *benchTB) error {
		tb.Errorf("soft %s", "error")
		return nil
	})
	if err == nil || err.Error() != "soft error" {
		t.Fatalf("err = %v, want soft error", err)
	}
}
