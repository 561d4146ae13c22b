//go:build ofi

package ofi_test

import (
	"fmt"

	"github.com/knemesis/knemesis/netmod/ofi"
)

// Two endpoints of one process, over TCP on the loopback: publish and
// insert addresses, post a receive, send header and payload, and drive
// both with Poll (manual progress) until both requests are done.
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
	toB, _ := a.Insert(b.Name(), "b")
	fromA, _ := b.Insert(a.Name(), "a")

	var s, r ofi.Request
	buf := make([]byte, 64)
	_ = b.Irecv(&r, fromA, 7, 0, [][]byte{buf})
	_ = a.Isend(&s, toB, 7, []byte("header.."), [][]byte{[]byte("hello, "), []byte("world")})
	for !s.Done() || !r.Done() {
		a.Poll()
		b.Poll()
	}
	fmt.Printf("%s %q tag %d: %q\n", a.Provider(), r.Hdr[:8], r.Tag, buf[:r.Len])
	// Output: tcp;ofi_rxm "header.." tag 7: "hello, world"
}
