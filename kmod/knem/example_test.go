package knem

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The bindings' usage, as tests rather than examples: they need the module,
// which only the QEMU guests have, and an example cannot skip.

// TestUsageInlineCopy: a sender declares its message as a single-use region
// and passes the cookie to the receiver (in an RTS message, say); the
// receiver copies it straight into its own buffer. Both sides run in
// different processes in real use.
func TestUsageInlineCopy(t *testing.T) {
	d := open(t)
	msg := []byte("hello through the kernel")
	cookie, err := d.CreateRegion([][]byte{msg}, ProtRead, FlagSingleUse)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	st, err := d.InlineCopy(Read, [][]byte{buf}, cookie, 0, All, 0, 0)
	if err != nil || st != StatusSuccess {
		t.Fatalf("InlineCopy: %v, %v", st, err)
	}
	if want := append([]byte("hello through the kernel"), make([]byte, 64-len(msg))...); !bytes.Equal(buf, want) {
		t.Fatalf("received %q, want %q", buf, want)
	}
}

// TestUsageStatusArray: an asynchronous copy on the driver's kernel thread
// reports through a slot of the status array, which the caller polls
// without system calls.
func TestUsageStatusArray(t *testing.T) {
	d := open(t)
	status, err := d.MapStatus(64)
	if err != nil {
		t.Fatal(err)
	}
	defer status.Unmap()

	src, dst := payload(11, 1<<20), make([]byte, 1<<20)
	cookie, err := d.CreateRegion([][]byte{src}, ProtRead, FlagSingleUse)
	if err != nil {
		t.Fatal(err)
	}
	slot, ok := status.Alloc()
	if !ok {
		t.Fatal("no free status slot")
	}
	defer status.Free(slot)
	st, err := d.InlineCopy(Read, [][]byte{dst}, cookie, 0, All, FlagMemcpyThread, slot)
	if err != nil {
		t.Fatal(err)
	}
	if st == StatusPending {
		// ... make progress on other messages, then (a bound on a
		// hang, not on speed):
		if st, err = status.Wait(slot, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if st != StatusSuccess || checksum(dst) != checksum(src) {
		t.Fatalf("status %v, checksum %#x, want success and %#x", st, checksum(dst), checksum(src))
	}
}

// TestUsageError: errors name the command and keep the driver's errno. A
// cookie of 0 never names a region.
func TestUsageError(t *testing.T) {
	d := open(t)
	_, err := d.InlineCopy(Read, [][]byte{make([]byte, 8)}, 0, 0, All, 0, 0)
	if !errors.Is(err, unix.EINVAL) || err.Error() != "knem: INLINE_COPY: invalid argument" {
		t.Fatalf("InlineCopy of cookie 0: %v, want knem: INLINE_COPY: invalid argument (EINVAL)", err)
	}
}
