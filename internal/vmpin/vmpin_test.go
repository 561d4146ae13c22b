package vmpin

import "testing"

// TestBytes: this process's VmPin line is found and read as whole KiB.
func TestBytes(t *testing.T) {
	n, err := Bytes()
	if err != nil || n%1024 != 0 {
		t.Fatalf("VmPin %d bytes, %v; want whole KiB and no error", n, err)
	}
}
