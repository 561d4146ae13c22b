package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressDrawsInPlaceAndClears(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, true, 4)
	p.step("shm 4K")
	p.step("shm 8K")
	if got := b.String(); !strings.HasPrefix(got, "\r[#######.......................]  25% shm 4K") ||
		!strings.Contains(got, "\r[###############...............]  50% shm 8K") {
		t.Errorf("bar drawn as %q", got)
	}
	p.done()
	p.done()
	p.step("cma 4K")
	if got := b.String(); strings.Count(got, "\r"+strings.Repeat(" ", 64)+"\r") != 1 || strings.Contains(got, "cma") {
		t.Errorf("after done: %q; want one clear and nothing drawn", got)
	}
	var quiet bytes.Buffer
	q := newProgress(&quiet, false, 4)
	q.step("x")
	q.done()
	if quiet.Len() != 0 {
		t.Errorf("a bar that is off wrote %q", quiet.String())
	}
}
