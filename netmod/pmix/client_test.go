//go:build pmix

package pmix

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestNodeMap parses the simulated-node override and refuses a malformed
// one with what was wrong.
func TestNodeMap(t *testing.T) {
	m, err := parseNodeMap("0, 0,1,1", 4)
	if err != nil || !reflect.DeepEqual(m, []int{0, 0, 1, 1}) {
		t.Fatalf("parseNodeMap: %v, %v", m, err)
	}
	if m, err := parseNodeMap("", 4); m != nil || err != nil {
		t.Fatalf("unset map: %v, %v", m, err)
	}
	for in, want := range map[string]string{
		"0,1":      `KNEMESIS_NODE_MAP="0,1" names 2 ranks, the job has 4`,
		"0,1,x,1":  `entry 2 ("x") is not a node id`,
		"0,1,-1,1": `entry 2 ("-1") is not a node id`,
	} {
		if _, err := parseNodeMap(in, 4); !errors.Is(err, ErrInvalidArg) || !strings.Contains(err.Error(), want) {
			t.Errorf("parseNodeMap(%q): %v, want ErrInvalidArg saying %q", in, err, want)
		}
	}
}

// TestInitAlone: a process no launcher started fails Init with
// ErrNotLaunched naming PMIx_Init and PMIx's status (PMIx 4.2 offers no
// singleton without a server).
func TestInitAlone(t *testing.T) {
	if Launched() {
		t.Skip("lacks no-pmix-launcher: needs a process started without a PMIx launcher (PMIX_NAMESPACE and PMIX_RANK are set: this one runs under one)")
	}
	c, err := Init()
	if err == nil {
		c.Finalize()
		t.Fatalf("Init without a launcher succeeded as rank %d of %d", c.Rank(), c.Size())
	}
	var pe *Error
	if !errors.Is(err, ErrNotLaunched) || !errors.As(err, &pe) || pe.Call != "PMIx_Init" || pe.Status >= 0 {
		t.Fatalf("Init without a launcher: %v, want ErrNotLaunched naming PMIx_Init", err)
	}
}
