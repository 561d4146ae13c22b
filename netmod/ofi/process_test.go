//go:build ofi

package ofi

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTwoProcesses sends every size from 0 B to 64 MiB to another process,
// which checks each message against the checksum in its header and answers
// with the checksum it computed; then the other process pulls a 64 MiB
// registered region with fi_read, its key sent in a message.
func TestTwoProcesses(t *testing.T) {
	if inChild(t.Name()) {
		if err := echoChild(); err != nil {
			t.Fatal(err)
		}
		return
	}
	c := startChild(t, nil)
	e := open(t, 0)
	peer, err := exchange(e, c.in, c.out, "child")
	if err != nil {
		t.Fatal(err)
	}
	if err := sendSizes(e, peer); err != nil {
		t.Fatal(err)
	}
}

// sendSizes sends every size of sizes to peer, which answers each with
// the length and checksum it received (echoChild).
func sendSizes(e *Endpoint, peer Addr) error {
	for _, n := range sizes {
		src := make([]byte, n)
		fill(src, uint64(n)+7)
		sum := crc32.Checksum(src, castagnoli)
		var s, r Request
		if err := e.Irecv(&r, peer, 2, 0, nil); err != nil {
			return err
		}
		if err := e.Isend(&s, peer, 1, header(n, sum), split(src)); err != nil {
			return err
		}
		if err := e.Wait(&s); err != nil {
			return err
		}
		if err := e.Wait(&r); err != nil {
			return err
		}
		if size, got := parseHeader(r.Hdr[:testHdr]); size != n || got != sum {
			return fmt.Errorf("%d bytes: the peer received %d bytes with checksum %#x, sent %#x", n, size, got, sum)
		}
	}
	return offerRegion(e, peer)
}

// offerRegion registers 64 MiB, sends its RemoteRegion as an RTS would
// carry it, and waits for the peer, which pulls it with fi_read, to answer
// with the length and checksum it read.
func offerRegion(e *Endpoint, peer Addr) error {
	src := make([]byte, 64<<20)
	fill(src, 11)
	sum := crc32.Checksum(src, castagnoli)
	var reg Region
	if err := e.Register(&reg, src); err != nil {
		return err
	}
	defer reg.Close()
	var rts [RemoteRegionSize]byte
	reg.Remote().Put(rts[:])
	var s, r Request
	if err := e.Irecv(&r, peer, 2, 0, nil); err != nil {
		return err
	}
	if err := e.Isend(&s, peer, 3, header(len(src), sum), [][]byte{rts[:]}); err != nil {
		return err
	}
	if err := e.Wait(&s); err != nil {
		return err
	}
	if err := e.Wait(&r); err != nil { // polling, which serves the peer's read
		return err
	}
	if size, got := parseHeader(r.Hdr[:testHdr]); size != len(src) || got != sum {
		return fmt.Errorf("the peer read %d bytes of the region with checksum %#x, want %d with %#x", size, got, len(src), sum)
	}
	return nil
}

// readRegion is the other side of offerRegion.
func readRegion(e *Endpoint, peer Addr, buf []byte) error {
	var r, rd, s Request
	var rts [RemoteRegionSize]byte
	if err := e.Irecv(&r, peer, 3, 0, [][]byte{rts[:]}); err != nil {
		return err
	}
	if err := e.Wait(&r); err != nil {
		return err
	}
	rr := GetRemoteRegion(rts[:])
	if rr.Len > uint64(len(buf)) {
		return fmt.Errorf("region of %d bytes, buffer of %d", rr.Len, len(buf))
	}
	dst := buf[:rr.Len]
	if err := e.Read(&rd, peer, dst, rr, 0); err != nil {
		return err
	}
	if err := e.Wait(&rd); err != nil {
		return err
	}
	if err := e.Isend(&s, peer, 2, header(rd.Len, crc32.Checksum(dst, castagnoli)), nil); err != nil {
		return err
	}
	return e.Wait(&s)
}

// echoChild receives len(sizes) messages and answers each with its length
// and checksum as received, then reads the region offerRegion offers.
func echoChild() error {
	in, out := parentLink()
	e, err := Open(Config{Provider: testProvider, Node: childNode(), HeaderSize: testHdr})
	if err != nil {
		return err
	}
	defer e.Close()
	peer, err := exchange(e, in, out, "peer")
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<20)
	for range sizes {
		var r, s Request
		if err := e.Irecv(&r, peer, 1, 0, split(buf)); err != nil {
			return err
		}
		if err := e.Wait(&r); err != nil {
			return err
		}
		if err := e.Isend(&s, peer, 2, header(r.Len, crc32.Checksum(buf[:r.Len], castagnoli)), nil); err != nil {
			return err
		}
		if err := e.Wait(&s); err != nil {
			return err
		}
	}
	return readRegion(e, peer, buf)
}

// TestPeerKilled kills the other process in the middle of a 64 MiB
// transfer, one pulled by fi_read and one sent as a tagged message: the
// survivor's request fails naming the peer instead of hanging.
func TestPeerKilled(t *testing.T) {
	for _, how := range []string{"read", "send"} {
		t.Run(how, func(t *testing.T) {
			if inChild(t.Name()) {
				if err := stallingChild(how); err != nil {
					t.Fatal(err)
				}
				return
			}
			peerKilled(t, how)
		})
	}
}

const killTimeout = time.Second

func peerKilled(t *testing.T, how string) {
	c := startChild(t, nil)
	e := open(t, killTimeout)
	peer, err := exchange(e, c.in, c.out, "child")
	if err != nil {
		t.Fatal(err)
	}
	line, err := readLine(c.in)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 64<<20)
	var r Request
	if how == "read" {
		var rr RemoteRegion
		if _, err := fmt.Sscanf(line, "%d %d %d", &rr.Addr, &rr.Key, &rr.Len); err != nil {
			t.Fatalf("child's region %q: %v", line, err)
		}
		err = e.Read(&r, peer, dst, rr, 0)
	} else {
		err = e.Irecv(&r, peer, 1, 0, [][]byte{dst})
	}
	if err != nil {
		t.Fatal(err)
	}
	for range 10000 { // the transfer starts; the child does not progress it
		e.Poll()
	}
	if r.Done() {
		t.Fatalf("the %s completed (%v) before the child was killed", how, r.Err())
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = e.Wait(&r)
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Peer != "child" || !strings.HasPrefix(pe.Address, "fi_sockaddr_in://127.0.0.1:") {
		t.Fatalf("%s from a killed peer: %v, want a *PeerError naming the child", how, err)
	}
	if !errors.Is(err, ErrPeerLost) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("%s from a killed peer: %v, want ErrPeerLost or ErrTimeout", how, err)
	}
	t.Logf("%s failed after %v: %v", how, time.Since(start).Round(time.Millisecond), err)
}

// stallingChild starts a 64 MiB transfer to its parent, tells it, and then
// stops driving progress until it is killed.
func stallingChild(how string) error {
	in, out := parentLink()
	e, err := Open(Config{Provider: testProvider, Node: testNode, HeaderSize: testHdr})
	if err != nil {
		return err
	}
	peer, err := exchange(e, in, out, "parent")
	if err != nil {
		return err
	}
	src := make([]byte, 64<<20)
	fill(src, 3)
	var s Request
	var reg Region
	if how == "read" {
		if err := e.Register(&reg, src); err != nil {
			return err
		}
		rr := reg.Remote()
		err = sendLine(out, "%d %d %d", rr.Addr, rr.Key, rr.Len)
	} else {
		if err = e.Isend(&s, peer, 1, header(len(src), 0), [][]byte{src}); err == nil {
			err = sendLine(out, "sending")
		}
	}
	if err != nil {
		return err
	}
	// A reader needs nothing from this side to start; a sender sets up
	// the connection and sends its RTS, but 200 polls cannot move
	// 64 MiB. Then it stalls.
	for k := 0; how == "send" && k < 200; k++ {
		e.Poll()
	}
	_, err = readLine(in) // until killed
	return errors.New("parent went away before killing " + strconv.Itoa(syscall.Getpid()) + ": " + fmt.Sprint(err))
}
