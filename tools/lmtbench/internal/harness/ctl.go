package harness

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The parent hands each rank three descriptors: a pipe to the peer, a pipe
// from the peer, and the shared memory the backend asked for. The pipes
// carry the harness's own commands, never payload: a blocking read lets a
// rank sleep while the other runs the placement probe, instead of spinning
// on the CPU the probe is measuring.
const (
	fdToPeer   = 3
	fdFromPeer = 4
	fdShared   = 5
)

// Commands rank 0 sends to rank 1.
const (
	cmdVerify = iota + 1
	cmdSample
	cmdDone
	cmdProbe // take part in the built-in placement probe
)

// ctl carries commands as 24-byte records: over the parent's pipes, or
// over any writer and reader that keep records whole (pair.go).
type ctl struct {
	to   io.Writer
	from io.Reader
	buf  [24]byte
}

func openCtl() *ctl {
	// The placement probe is exec'ed from rank 0; it must not hold the
	// pipes or the shared memory open.
	for _, fd := range []int{fdToPeer, fdFromPeer, fdShared} {
		closeOnExec(fd)
	}
	return newCtl(os.NewFile(fdToPeer, "to-peer"), os.NewFile(fdFromPeer, "from-peer"))
}

func (c *ctl) put(a, b, d int64) error {
	binary.LittleEndian.PutUint64(c.buf[0:], uint64(a))
	binary.LittleEndian.PutUint64(c.buf[8:], uint64(b))
	binary.LittleEndian.PutUint64(c.buf[16:], uint64(d))
	if _, err := c.to.Write(c.buf[:]); err != nil {
		return fmt.Errorf("control pipe to peer: %w", err)
	}
	return nil
}

func (c *ctl) get() (a, b, d int64, err error) {
	if _, err := io.ReadFull(c.from, c.buf[:]); err != nil {
		return 0, 0, 0, fmt.Errorf("control pipe from peer: %w", err)
	}
	return int64(binary.LittleEndian.Uint64(c.buf[0:])),
		int64(binary.LittleEndian.Uint64(c.buf[8:])),
		int64(binary.LittleEndian.Uint64(c.buf[16:])), nil
}

func newCtl(to io.Writer, from io.Reader) *ctl { return &ctl{to: to, from: from} }

func closeOnExec(fd int) { unix.CloseOnExec(fd) }
