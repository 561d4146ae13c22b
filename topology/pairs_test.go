package topology

import (
	"fmt"
	"testing"
)

func TestPairs(t *testing.T) {
	tests := []struct {
		fixture          string
		shared, unshared string
	}{
		{"xeon-e5345", "[0 4]", "[0 1]"},
		{"amd-ccx", "[0 1]", "[0 4]"}, // not the SMT sibling 8
		{"epyc-kvm", "[0 1]", "none"},
	}
	for _, tt := range tests {
		s, u, hs, hu := mustSysfs(t, tt.fixture).Pairs()
		str := func(p [2]int, ok bool) string {
			if !ok {
				return "none"
			}
			return fmt.Sprint(p)
		}
		if str(s, hs) != tt.shared || str(u, hu) != tt.unshared {
			t.Errorf("%s: shared %s unshared %s; want %s %s", tt.fixture, str(s, hs), str(u, hu), tt.shared, tt.unshared)
		}
	}
}
