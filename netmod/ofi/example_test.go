//go:build ofi

package ofi_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/knemesis/knemesis/netmod/ofi"
)

// Two endpoints of one process, over TCP on the loopback: publish and
// insert addresses, post a receive, send header and payload, and drive
// both with Poll (manual progress) until both requests are done. A
// message lost would leave them pending for ever: the loop gives up once
// nothing has completed for a minute.
func Example() {
	cfg := ofi.Config{Provider: "tcp;ofi_rxm", Node: "127.0.0.1", HeaderSize: 8}
	a, err := ofi.Open(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := ofi.Open(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	toB, err1 := a.Insert(b.Name(), "b")
	fromA, err2 := b.Insert(a.Name(), "a")
	if err := errors.Join(err1, err2); err != nil {
		fmt.Println(err)
		return
	}

	var s, r ofi.Request
	buf := make([]byte, 64)
	err1 = b.Irecv(&r, fromA, 7, 0, [][]byte{buf})
	err2 = a.Isend(&s, toB, 7, []byte("header.."), [][]byte{[]byte("hello, "), []byte("world")})
	if err := errors.Join(err1, err2); err != nil {
		fmt.Println(err)
		return
	}
	const stall = time.Minute
	for moved := time.Now(); !s.Done() || !r.Done(); {
		na, err1 := a.Poll()
		nb, err2 := b.Poll()
		if err := errors.Join(err1, err2); err != nil {
			fmt.Println(err)
			return
		}
		if na+nb > 0 {
			moved = time.Now()
		} else if time.Since(moved) > stall {
			fmt.Printf("nothing completed for %v: send done %v, receive done %v\n", stall, s.Done(), r.Done())
			return
		}
	}
	if err := errors.Join(s.Err(), r.Err()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %q tag %d: %q\n", a.Provider(), r.Hdr[:8], r.Tag, buf[:r.Len])
	// Output: tcp;ofi_rxm "header.." tag 7: "hello, world"
}
