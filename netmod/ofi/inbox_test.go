//go:build ofi

package ofi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

// TestInbox: three endpoints send 300 messages each, of varying length, to
// one Inbox of eight bounce buffers; every message arrives once, intact,
// and in its sender's order.
func TestInbox(t *testing.T) {
	const senders, msgs, size = 3, 300, 512
	rx, err := Open(Config{Provider: testProvider, Node: testNode, HeaderSize: testHdr, Sources: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close() })
	eps := []*Endpoint{rx}
	var to [senders]Addr
	for k := range senders {
		tx := open(t, 0)
		var err error
		if to[k], err = tx.Insert(rx.Name(), "receiver"); err != nil {
			t.Fatal(err)
		}
		if _, err := rx.Insert(tx.Name(), fmt.Sprintf("sender %d", k)); err != nil {
			t.Fatal(err)
		}
		eps = append(eps, tx)
	}
	var in Inbox
	if err := in.Open(rx, 8, size, 5, 0); err != nil {
		t.Fatal(err)
	}
	next := make([]int, senders)
	got := 0
	if !rx.Sources() {
		t.Fatalf("provider %s gives no message sources (FI_SOURCE)", rx.Provider())
	}
	deliver := func(from Addr, tag uint64, hdr, payload []byte) error {
		src, seq := int(hdr[0]), int(binary.LittleEndian.Uint32(hdr[4:]))
		if src >= senders || seq != next[src] {
			return fmt.Errorf("message %d from sender %d, expected %d", seq, src, next[src])
		}
		if from != Addr(src) || tag != 5 {
			return fmt.Errorf("message %d from sender %d (Addr %d) came from Addr %d with tag %d", seq, src, src, from, tag)
		}
		if len(payload) != seq%size || crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(hdr[8:]) {
			return fmt.Errorf("message %d from sender %d: %d bytes, checksum differs", seq, src, len(payload))
		}
		next[src]++
		got++
		return nil
	}
	var sends [senders]Request
	payload := make([]byte, size)
	hdr := make([]byte, testHdr)
	for seq := range msgs {
		for k := range senders {
			n := seq % size
			fill(payload[:n], uint64(seq*senders+k))
			hdr[0] = byte(k)
			binary.LittleEndian.PutUint32(hdr[4:], uint32(seq))
			binary.LittleEndian.PutUint32(hdr[8:], crc32.Checksum(payload[:n], castagnoli))
			if err := eps[k+1].Isend(&sends[k], to[k], 5, hdr, [][]byte{payload[:n]}); err != nil {
				t.Fatal(err)
			}
			for !sends[k].Done() { // payload is reused: the send must be done
				pollDrain(t, eps, &in, deliver)
			}
			if sends[k].Err() != nil {
				t.Fatal(sends[k].Err())
			}
		}
	}
	for got < senders*msgs {
		pollDrain(t, eps, &in, deliver)
	}
	in.Close()
}

func pollDrain(t *testing.T, eps []*Endpoint, in *Inbox, deliver func(Addr, uint64, []byte, []byte) error) {
	t.Helper()
	for _, e := range eps {
		if _, err := e.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Drain(deliver); err != nil {
		t.Fatal(err)
	}
}

// TestInboxTooLong: a message longer than the inbox's buffers fails Drain
// with ErrTruncated, and nothing is written past its buffer (into the next
// one, posted beside it). Nemesis never sends such a packet: with
// tcp;ofi_rxm 1.17 nothing more arrives from that peer afterwards.
func TestInboxTooLong(t *testing.T) {
	a, b := pair(t)
	var in Inbox
	if err := in.Open(b, 2, 64, 1, 0); err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var s Request
	long := make([]byte, 100)
	fill(long, 5)
	if err := a.Isend(&s, 0, 1, header(0, 0), [][]byte{long}); err != nil {
		t.Fatal(err)
	}
	delivered := 0
	var err error
	for k := 0; err == nil; k++ {
		if k == 1<<22 {
			t.Fatal("no error from Drain for a message longer than the inbox's buffers")
		}
		a.Poll()
		b.Poll()
		_, err = in.Drain(func(Addr, uint64, []byte, []byte) error { delivered++; return nil })
	}
	if !errors.Is(err, ErrTruncated) || delivered != 0 {
		t.Fatalf("Drain: %v after %d messages, want ErrTruncated and none delivered", err, delivered)
	}
	if !in.reqs[1].Done() {
		for i, c := range in.bufs[1] {
			if c != 0 {
				t.Fatalf("byte %d of the next buffer was written by the truncated message", i)
			}
		}
	}
}

// TestInboxNoAllocation: a message through the inbox, Isend to delivery
// and repost, allocates nothing.
func TestInboxNoAllocation(t *testing.T) {
	a, b := pair(t)
	var in Inbox
	if err := in.Open(b, 4, 64, 1, 0); err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var s Request
	h, p := header(0, 0), [][]byte{make([]byte, 32)}
	got := 0
	deliver := func(Addr, uint64, []byte, []byte) error { got++; return nil }
	round := func() {
		want := got + 1
		if err := a.Isend(&s, 0, 1, h, p); err != nil {
			t.Fatal(err)
		}
		for got < want || !s.Done() {
			a.Poll()
			b.Poll()
			if _, err := in.Drain(deliver); err != nil {
				t.Fatal(err)
			}
		}
	}
	round()
	if n := testing.AllocsPerRun(200, round); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
}
