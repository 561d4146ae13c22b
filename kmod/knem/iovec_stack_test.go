package knem

import (
	"testing"
	"unsafe"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

// TestIovecArrayFollowsStackGrowth: the iovec array that InlineCopy and
// the others hand the driver sits in the caller's stack frame; when that
// stack grows (here in a fresh goroutine, whose stack starts small) the
// runtime moves it, and the pointer in the command must follow. A uint64
// address would keep pointing at the freed stack, and the driver would
// then take whatever lies there for the caller's buffers.
func TestIovecArrayFollowsStackGrowth(t *testing.T) {
	buf := make([]byte, 100)
	type outcome struct{ before, after, inCommand uintptr }
	done := make(chan outcome)
	go func() {
		var stack [stackIovecs]uapi.ParamIovec
		iov, err := iovecs(&stack, [][]byte{buf})
		if err != nil {
			panic(err)
		}
		c := uapi.InlineCopy{LocalIovecArray: iovecPtr(iov), LocalIovecNr: uint32(len(iov))}
		before := uintptr(unsafe.Pointer(&stack[0]))
		growStack(64)
		done <- outcome{before, uintptr(unsafe.Pointer(&stack[0])), uintptr(unsafe.Pointer(c.LocalIovecArray))}
	}()
	o := <-done
	if o.before == o.after {
		t.Fatalf("the stack did not move (%#x): the test shows nothing", o.before)
	}
	if o.inCommand != o.after {
		t.Fatalf("the command's iovec array is at %#x after the stack moved from %#x to %#x", o.inCommand, o.before, o.after)
	}
}

// growStack uses about depth KiB of stack.
//
//go:noinline
func growStack(depth int) byte {
	var frame [1024]byte
	frame[depth%len(frame)] = byte(depth)
	if depth == 0 {
		return frame[0]
	}
	return growStack(depth-1) + frame[depth%len(frame)]
}
