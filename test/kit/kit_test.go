package kit

import (
	"slices"
	"testing"
)

func TestSelect(t *testing.T) {
	names := func(bs []Backend) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	for _, tt := range []struct {
		list string
		want []string
	}{
		{"etcd,redis", []string{"etcd", "redis"}},
		{" redis , etcd", []string{"redis", "etcd"}},
		{"redis,", []string{"redis"}},
		{"", nil},
	} {
		bs, err := Select(tt.list)
		if err != nil || !slices.Equal(names(bs), tt.want) {
			t.Errorf("Select(%q) = %q, %v; want %q", tt.list, names(bs), err, tt.want)
		}
	}
	if _, err := Select("etcd,zookeeper"); err == nil {
		t.Error("Select accepted an unknown backend")
	}
}
