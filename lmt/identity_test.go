package lmt

import "testing"

// TestIdentitiesDistinct: every backend has its own wire number and name,
// a non-zero number (0 names no backend in an RTS), and a known flow. Two
// backends merged from separate branches once took the same number, which
// would make every rank read the one's RTS as the other's.
func TestIdentitiesDistinct(t *testing.T) {
	ids, names := map[uint8]string{}, map[string]bool{}
	for _, id := range Identities() {
		if id.ID == 0 {
			t.Errorf("%s: wire number 0", id.Name)
		}
		if other, dup := ids[id.ID]; dup {
			t.Errorf("%s and %s share wire number %d", other, id.Name, id.ID)
		}
		if names[id.Name] {
			t.Errorf("backend name %q declared twice", id.Name)
		}
		if id.Copies != 1 && id.Copies != 2 {
			t.Errorf("%s: %d copies", id.Name, id.Copies)
		}
		ids[id.ID], names[id.Name] = id.Name, true
	}
}
