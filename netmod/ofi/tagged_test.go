//go:build ofi

package ofi

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
)

// TestSizes sends every size from 0 B to 64 MiB, header and three payload
// entries, between two endpoints of this process, and checks every byte.
func TestSizes(t *testing.T) {
	a, b := pair(t)
	for _, n := range sizes {
		src, dst := make([]byte, n), make([]byte, n)
		fill(src, uint64(n))
		var s, r Request
		if err := b.Irecv(&r, 0, 42, 0, split(dst)); err != nil {
			t.Fatal(err)
		}
		if err := a.Isend(&s, 0, 42, header(n, crc32.Checksum(src, castagnoli)), split(src)); err != nil {
			t.Fatal(err)
		}
		waitAll(t, []*Endpoint{a, b}, &s, &r)
		if s.Err() != nil || r.Err() != nil {
			t.Fatalf("%d bytes: send %v, receive %v", n, s.Err(), r.Err())
		}
		size, sum := parseHeader(r.Hdr[:testHdr])
		if r.Len != n || size != n || r.Tag != 42 {
			t.Fatalf("%d bytes: received Len %d, header size %d, tag %d", n, r.Len, size, r.Tag)
		}
		if got := crc32.Checksum(dst, castagnoli); got != sum {
			t.Fatalf("%d bytes: checksum %#x, sender's %#x", n, got, sum)
		}
	}
}

// TestTagMatching posts receives for two tags and a wildcard, sends in
// another order, and checks that each message found its receive, and that
// two messages of one tag keep their order.
func TestTagMatching(t *testing.T) {
	a, b := pair(t)
	var r5, r7, rAny, s1, s2, s3, s4 Request
	var b5, b7, bAny [8]byte
	const anyTag = ^uint64(0)
	if err := b.Irecv(&r5, 0, 5, 0, [][]byte{b5[:]}); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&r7, 0, 7, 0, [][]byte{b7[:]}); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&rAny, AnyAddr, 0, anyTag, [][]byte{bAny[:]}); err != nil {
		t.Fatal(err)
	}
	h := header(0, 0)
	for _, m := range []struct {
		r   *Request
		tag uint64
		msg string
	}{{&s1, 7, "seven..."}, {&s2, 5, "five...."}, {&s3, 5, "five-two"}} {
		if err := a.Isend(m.r, 0, m.tag, h, [][]byte{[]byte(m.msg)}); err != nil {
			t.Fatal(err)
		}
	}
	waitAll(t, []*Endpoint{a, b}, &s1, &s2, &s3, &r5, &r7, &rAny)
	got := fmt.Sprintf("%s/%d %s/%d %s/%d", b5[:], r5.Tag, b7[:], r7.Tag, bAny[:], rAny.Tag)
	if want := "five..../5 seven.../7 five-two/5"; got != want {
		t.Fatalf("matched %q, want %q", got, want)
	}
	// A receive whose tag no message carries stays posted.
	var r9 Request
	if err := b.Irecv(&r9, 0, 9, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Isend(&s4, 0, 10, h, nil); err != nil {
		t.Fatal(err)
	}
	waitAll(t, []*Endpoint{a, b}, &s4)
	for range 1000 {
		b.Poll()
	}
	if r9.Done() {
		t.Fatalf("receive for tag 9 matched a message of tag 10")
	}
}

// TestTruncated receives a message into shorter buffers: ErrTruncated
// naming the buffers' length, nothing written past them.
func TestTruncated(t *testing.T) {
	a, b := pair(t)
	src := make([]byte, 1000)
	fill(src, 1)
	guard := bytes.Repeat([]byte{0xee}, 700)
	var s, r Request
	if err := b.Irecv(&r, 0, 1, 0, [][]byte{guard[:300], guard[400:600]}); err != nil {
		t.Fatal(err)
	}
	if err := a.Isend(&s, 0, 1, header(1000, 0), [][]byte{src}); err != nil {
		t.Fatal(err)
	}
	waitAll(t, []*Endpoint{a, b}, &s, &r)
	if !errors.Is(r.Err(), ErrTruncated) || !strings.Contains(r.Err().Error(), "receive buffers of 500") {
		t.Fatalf("receive: %v, want ErrTruncated for 1000 bytes into 500", r.Err())
	}
	// Providers differ in what a truncated receive holds: the message's
	// start, or (tcp;ofi_rxm) nothing at all.
	untouched := bytes.Count(guard, []byte{0xee}) == len(guard)
	filled := bytes.Equal(guard[:300], src[:300]) && bytes.Equal(guard[400:600], src[300:500])
	if !untouched && !filled {
		t.Fatalf("truncated receive holds neither the message's start nor its old contents (Len %d)", r.Len)
	}
	for _, i := range []int{300, 399, 600, 699} {
		if guard[i] != 0xee {
			t.Fatalf("byte %d outside the receive buffers was written", i)
		}
	}
}

// TestBadArguments: each misuse is refused with what was wrong.
func TestBadArguments(t *testing.T) {
	a, _ := pair(t)
	var r Request
	four := [][]byte{{1}, {2}, {3}, {4}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{a.Isend(&r, 0, 0, make([]byte, 3), nil), "header of 3 bytes, this endpoint's messages carry 16"},
		{a.Isend(&r, 5, 0, make([]byte, testHdr), nil), "address 5 was never inserted (1 peers)"},
		{a.Isend(&r, AnyAddr, 0, make([]byte, testHdr), nil), "a send needs a peer"},
		{a.Isend(&r, 0, 0, make([]byte, testHdr), four), "4 non-empty payload entries, provider tcp;ofi_rxm takes 3"},
	} {
		if !errors.Is(c.err, ErrInvalidArg) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want ErrInvalidArg saying %q", c.err, c.want)
		}
	}
	var reg Region
	if err := a.Register(&reg, nil); !errors.Is(err, ErrInvalidArg) {
		t.Errorf("registering an empty buffer: %v, want ErrInvalidArg", err)
	}
	if err := a.Read(&r, 0, make([]byte, 10), RemoteRegion{Len: 8}, 0); !errors.Is(err, ErrInvalidArg) ||
		!strings.Contains(err.Error(), "read of 10 bytes at offset 0 of a 8-byte region") {
		t.Errorf("reading past a region: %v", err)
	}
}

// TestBadProvider: a provider that does not exist fails Open with the
// provider's name, what fi_getinfo said, and what it offers instead.
func TestBadProvider(t *testing.T) {
	_, err := Open(Config{Provider: "nosuch", Node: testNode})
	var se *StartError
	if !errors.As(err, &se) || !errors.Is(err, ErrNoProvider) {
		t.Fatalf("Open of provider nosuch: %v, want a *StartError", err)
	}
	for _, want := range []string{`provider "nosuch" on 127.0.0.1`, "fi_getinfo: No data available (61)", testProvider} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Log(err)
	if se.Err != 61 {
		t.Errorf("StartError.Err = %d, want FI_ENODATA (61)", int(se.Err))
	}
}

// TestNoAllocation: a small message, Isend to completed Irecv, and an RMA
// read, allocate nothing in Go.
func TestNoAllocation(t *testing.T) {
	a, b := pair(t)
	src, dst := make([]byte, 64), make([]byte, 64)
	h := header(64, 0)
	srcIov, dstIov := [][]byte{src}, [][]byte{dst}
	var s, r Request
	eps := []*Endpoint{a, b}
	round := func() {
		if err := b.Irecv(&r, 0, 3, 0, dstIov); err != nil {
			t.Fatal(err)
		}
		if err := a.Isend(&s, 0, 3, h, srcIov); err != nil {
			t.Fatal(err)
		}
		for !s.Done() || !r.Done() {
			a.Poll()
			b.Poll()
		}
	}
	round()
	if n := testing.AllocsPerRun(200, round); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
	var reg Region
	if err := a.Register(&reg, src); err != nil {
		t.Fatal(err)
	}
	rr := reg.Remote()
	read := func() {
		if err := b.Read(&r, 0, dst, rr, 0); err != nil {
			t.Fatal(err)
		}
		waitAll(t, eps, &r)
	}
	read()
	if n := testing.AllocsPerRun(200, read); n != 0 {
		t.Fatalf("%v allocations per read", n)
	}
}
