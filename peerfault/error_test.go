package peerfault_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/knemesis/knemesis/peerfault"
)

func TestKinds(t *testing.T) {
	c := peerfault.OutOfBounds(3, "total of a fastbox", 1<<62, 65536)
	d := peerfault.Dead(2, 99, "died without closing its endpoint", os.ErrClosed)
	wrapped := fmt.Errorf("receive: %w", c)
	var pe *peerfault.Error
	switch {
	case !errors.Is(wrapped, peerfault.ErrCorrupt) || errors.Is(wrapped, peerfault.ErrDead):
		t.Fatalf("%v: kind not matched", wrapped)
	case !errors.As(wrapped, &pe) || pe.Rank != 3 || pe.Field != "total of a fastbox" || pe.Value != 1<<62 || pe.Limit != 65536:
		t.Fatalf("errors.As gave %+v", pe)
	case c.Error() != "knemesis: rank 3 wrote a corrupt total of a fastbox: 4611686018427387904, above the limit of 65536":
		t.Fatalf("message %q", c.Error())
	case !errors.Is(d, peerfault.ErrDead) || !errors.Is(d, os.ErrClosed) || errors.Is(d, peerfault.ErrCorrupt):
		t.Fatalf("%v: kinds wrong", d)
	case d.Error() != "knemesis: rank 2 (pid 99) is gone: died without closing its endpoint: file already closed":
		t.Fatalf("message %q", d.Error())
	case c.Fix() == d.Fix():
		t.Fatal("the same fix for a corrupt and a dead peer")
	}
}

func ExampleError() {
	var err error = fmt.Errorf("recv: %w", peerfault.Corrupt(1, "length of a line record", "%d bytes (max %d)", 45, 44))
	var pe *peerfault.Error
	if errors.As(err, &pe) && errors.Is(err, peerfault.ErrCorrupt) {
		fmt.Println(pe.Rank, pe.Field)
	}
	// Output: 1 length of a line record
}
