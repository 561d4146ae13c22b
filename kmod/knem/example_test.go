package knem_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
)

// A sender declares its message as a single-use region and passes the
// cookie to the receiver (in an RTS message, say); the receiver copies it
// straight into its own buffer. Both sides run in different processes in
// real use.
func Example() {
	d, err := knem.Open()
	if errors.Is(err, knem.ErrNoDevice) {
		return // the module is not loaded here
	}
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	msg := []byte("hello through the kernel")
	cookie, err := d.CreateRegion([][]byte{msg}, knem.ProtRead, knem.FlagSingleUse)
	if err != nil {
		log.Fatal(err)
	}

	buf := make([]byte, 64)
	st, err := d.InlineCopy(knem.Read, [][]byte{buf}, cookie, 0, knem.All, 0, 0)
	if err != nil || st != knem.StatusSuccess {
		log.Fatal(st, err)
	}
	fmt.Printf("%s\n", buf[:len(msg)])
}

// An asynchronous copy on the driver's kernel thread reports through a slot
// of the status array, which the caller polls without system calls.
func ExampleStatusArray() {
	d, err := knem.Open()
	if err != nil {
		return
	}
	defer d.Close()
	status, err := d.MapStatus(64)
	if err != nil {
		log.Fatal(err)
	}
	defer status.Unmap()

	src, dst := make([]byte, 1<<20), make([]byte, 1<<20)
	cookie, err := d.CreateRegion([][]byte{src}, knem.ProtRead, knem.FlagSingleUse)
	if err != nil {
		log.Fatal(err)
	}
	slot, ok := status.Alloc()
	if !ok {
		log.Fatal("no free status slot")
	}
	defer status.Free(slot)
	st, err := d.InlineCopy(knem.Read, [][]byte{dst}, cookie, 0, knem.All, knem.FlagMemcpyThread, slot)
	if err != nil {
		log.Fatal(err)
	}
	if st == knem.StatusPending {
		// ... make progress on other messages, then:
		st = status.Wait(slot, time.Second)
	}
	fmt.Println(st)
}

// Errors name the command and keep the driver's errno.
func ExampleError() {
	d, err := knem.Open()
	if err != nil {
		return
	}
	defer d.Close()
	_, err = d.InlineCopy(knem.Read, [][]byte{make([]byte, 8)}, 0, 0, knem.All, 0, 0)
	fmt.Println(errors.Is(err, unix.EINVAL), err)
	// A cookie of 0 never names a region:
	//   true knem: INLINE_COPY: invalid argument
}
