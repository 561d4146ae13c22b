//go:build pmix && ofi

package pmix

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/netmod/ofi"
)

const (
	envRing  = "KNEMESIS_PMIX_RING"
	ringSize = 4
	addrKey  = "knemesis.ofi.addr"
	ringHdr  = 16
	ringMsg  = 1<<20 + 5
)

// TestRingUnderMpirun starts four ranks of this test binary with Open
// MPI's mpirun, the node ids overridden to simulate two nodes of two
// ranks. Each rank finds its place through PMIx, publishes its libfabric
// address with Put/Commit/Fence, inserts everyone's, and a 1 MiB message
// goes round the ring over tcp;ofi_rxm on the loopback, checked at every
// hop.
func TestRingUnderMpirun(t *testing.T) {
	if os.Getenv(envRing) != "" {
		if err := ringRank(); err != nil {
			t.Fatal(err)
		}
		return
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("lacks mpirun: mpirun (Debian package openmpi-bin) is not installed: no PMIx launcher to test under")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "--oversubscribe", "--allow-run-as-root", "-np", fmt.Sprint(ringSize),
		"-x", envRing+"=1", "-x", EnvNodeMap+"=0,0,1,1",
		os.Args[0], "-test.run=^TestRingUnderMpirun$", "-test.count=1", "-test.v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	for r := range ringSize {
		want := fmt.Sprintf("rank %d of %d on node %d: ring ok", r, ringSize, r/2)
		if !strings.Contains(string(out), want) {
			t.Fatalf("no %q in the output of mpirun:\n%s", want, out)
		}
	}
	t.Logf("%s", out)
}

func ringRank() error {
	c, err := Init()
	if err != nil {
		return err
	}
	defer c.Finalize()
	if c.Size() != ringSize {
		return fmt.Errorf("PMIx says the job has %d ranks, mpirun started %d", c.Size(), ringSize)
	}
	if c.Node() != c.Rank()/2 {
		return fmt.Errorf("rank %d is on node %d, %s says %d", c.Rank(), c.Node(), EnvNodeMap, c.Rank()/2)
	}
	// Under the override, the launcher still has every rank on its one node.
	if node, err := c.launcherNode(c.Rank()); err != nil || node != 0 {
		return fmt.Errorf("PMIX_NODEID of rank %d: %d, %v; mpirun ran every rank on node 0", c.Rank(), node, err)
	}
	// So does the fallback for servers without node ids, by hostname.
	if nodes, err := c.nodesByHost(); err != nil || fmt.Sprint(nodes) != "[0 0 0 0]" {
		return fmt.Errorf("nodes by hostname: %v, %v; mpirun ran every rank on one host", nodes, err)
	}
	e, err := ofi.Open(ofi.Config{Provider: "tcp;ofi_rxm", Node: "127.0.0.1", HeaderSize: ringHdr})
	if err != nil {
		return err
	}
	defer e.Close()
	if err := publish(c, e); err != nil {
		return err
	}
	if err := ring(c, e); err != nil {
		return err
	}
	// Nobody closes its endpoint while a neighbour may still need it.
	if err := c.Fence(); err != nil {
		return err
	}
	fmt.Printf("rank %d of %d on node %d: ring ok\n", c.Rank(), c.Size(), c.Node())
	return nil
}

// publish exchanges the endpoints' addresses through PMIx and inserts them
// in rank order, so that Addr(r) is rank r.
func publish(c *Client, e *ofi.Endpoint) error {
	if err := c.Put(addrKey, e.Name()); err != nil {
		return err
	}
	if err := c.Commit(); err != nil {
		return err
	}
	if err := c.Fence(); err != nil {
		return err
	}
	for r := range c.Size() {
		name, err := c.Get(r, addrKey)
		if err != nil {
			return err
		}
		a, err := e.Insert(name, fmt.Sprintf("rank %d", r))
		if err != nil {
			return err
		}
		if a != ofi.Addr(r) {
			return fmt.Errorf("rank %d's address went in at %d", r, a)
		}
	}
	return nil
}

// ring sends a message from rank 0 round the ring; every rank checks its
// checksum and counts the hop.
func ring(c *Client, e *ofi.Endpoint) error {
	me, n := c.Rank(), c.Size()
	left, right := ofi.Addr((me+n-1)%n), ofi.Addr((me+1)%n)
	buf := make([]byte, ringMsg)
	hdr := make([]byte, ringHdr)
	var s, r ofi.Request
	if me == 0 {
		for i := range buf {
			buf[i] = byte(i*7 + i>>11)
		}
		binary.LittleEndian.PutUint32(hdr, crc32.ChecksumIEEE(buf))
		if err := send(e, &s, right, hdr, buf); err != nil {
			return err
		}
	}
	if err := e.Irecv(&r, left, 9, 0, [][]byte{buf}); err != nil {
		return err
	}
	if err := e.Wait(&r); err != nil {
		return err
	}
	sum, hops := binary.LittleEndian.Uint32(r.Hdr[:]), binary.LittleEndian.Uint32(r.Hdr[4:])
	if got := crc32.ChecksumIEEE(buf); r.Len != ringMsg || got != sum {
		return fmt.Errorf("from rank %d: %d bytes with checksum %#x, want %d with %#x", left, r.Len, got, ringMsg, sum)
	}
	if hops != uint32((me+n-1)%n) {
		return fmt.Errorf("message made %d hops before rank %d", hops, me)
	}
	if me == 0 {
		return nil
	}
	copy(hdr, r.Hdr[:ringHdr])
	binary.LittleEndian.PutUint32(hdr[4:], hops+1)
	return send(e, &s, right, hdr, buf)
}

func send(e *ofi.Endpoint, s *ofi.Request, to ofi.Addr, hdr, buf []byte) error {
	if err := e.Isend(s, to, 9, hdr, [][]byte{buf}); err != nil {
		return err
	}
	return e.Wait(s)
}
