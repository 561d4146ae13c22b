package memcopy

import (
	"bytes"
	"testing"
)

func TestCopyCountsShorterSide(t *testing.T) {
	src := []byte("0123456789")
	dst := make([]byte, 4)
	if n := Copy(dst, src); n != 4 || !bytes.Equal(dst, src[:4]) {
		t.Fatalf("Copy = %d, %q; want 4, %q", n, dst, src[:4])
	}
	dst = make([]byte, 20)
	if n := Copy(dst, src); n != 10 || !bytes.Equal(dst[:10], src) {
		t.Fatalf("Copy = %d, %q; want 10, %q", n, dst[:10], src)
	}
}
