package copyprobe_test

import (
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// TestEndpointIovCopies counts the copies of one transferSize message sent
// with Endpoint.Sendv from a scattered list into a differently scattered
// Recvv list: lists cost no packing copy. Without an LMT the message goes
// through cells, gathered into them and scattered out of them, two user
// copies per byte as for one buffer; through the LMT the engine gets the
// lists themselves, so the shm ring makes its two user copies and CMA its
// one kernel copy, with nothing more than the rendezvous cells on top
// (the LMT's CTS and DONE packets, copied into and out of cells: tens of
// bytes).
func TestEndpointIovCopies(t *testing.T) {
	for _, c := range []struct {
		backend string // "" for no LMT: the cells carry everything
		want    expect
		control uint64 // user bytes allowed on top: LMT control packets
	}{
		{"", expect{user: 2}, 0},
		{"shm", expect{user: 2}, 256},
		{"cma", expect{kernel: 1}, 256},
	} {
		name := c.backend
		if name == "" {
			name = "cells"
		}
		t.Run(name, func(t *testing.T) {
			m, ok := run(t, job{rank: func(p launch.Proc) error { return sendIov(p, c.backend) }})
			if !ok {
				return
			}
			checkModes(t, m, c.want)
			got := m.Tracepoint.Bytes
			wantUser, wantKernel := uint64(c.want.user)*transferSize, uint64(c.want.kernel)*transferSize
			if got.Kernel != wantKernel || got.User < wantUser || got.User > wantUser+c.control {
				t.Errorf("counted user %d, kernel %d bytes; want %d (+ at most %d of control packets) and exactly %d", got.User, got.Kernel, wantUser, c.control, wantKernel)
			}
		})
	}
}

// sendIov moves transferSize bytes from rank 0's list to rank 1's, through
// backend (none: cells only), and checks them on arrival.
func sendIov(p launch.Proc, backend string) error {
	ep, err := nemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	if backend != "" {
		l, err := attach.Attach(ep, attach.Options{Prefer: []string{backend}})
		if err != nil {
			return err
		}
		defer l.Close()
	}
	if p.Rank == 0 {
		b := lmttest.NewBuffer(transferSize, 1, true)
		b.FillMessage()
		if err := ep.Sendv(1, 0, b.Iov); err != nil {
			return err
		}
		// Leave only once the receiver is done: a peer gone early fails
		// the rendezvous.
		_, err := ep.Recv(1, 1, nil)
		return err
	}
	b := lmttest.NewSplitBuffer(3, []int{0, 5, 8190, 0, transferSize/2 - 8195, transferSize / 2, 0})
	st, err := ep.Recvv(0, 0, b.Iov)
	if err != nil || st.Count != transferSize {
		return fmt.Errorf("Recvv: %+v, %v", st, err)
	}
	if err := b.Verify(transferSize); err != nil {
		return err
	}
	return ep.Send(0, 1, nil)
}

// TestArenaIsOneUserCopy counts the copies of one transferSize message sent
// from a buffer of the job's shared arena (Endpoint.Alloc): the receiver
// copies it once, in user space, out of the sender's buffer, with no
// kernel copy, whether the endpoint's descriptor carried it (the default)
// or the LMT's arena backend (named in the preference); only the
// descriptor, or the rendezvous packets (RTS, DONE), come on top.
func TestArenaIsOneUserCopy(t *testing.T) {
	for _, prefer := range []string{"", lmt.Arena} {
		name := "descriptor"
		if prefer != "" {
			name = "lmt-" + prefer
		}
		t.Run(name, func(t *testing.T) {
			m, ok := run(t, job{rank: func(p launch.Proc) error { return sendFromArena(p, prefer) }})
			if !ok {
				return
			}
			checkModes(t, m, expect{user: 1})
			got := m.Tracepoint.Bytes
			if got.Kernel != 0 || got.User < transferSize || got.User > transferSize+256 {
				t.Errorf("counted user %d, kernel %d bytes; want %d (+ at most 256 of control packets) and 0", got.User, got.Kernel, uint64(transferSize))
			}
		})
	}
}

// sendFromArena moves transferSize bytes from rank 0's arena into an
// ordinary buffer of rank 1 and checks them on arrival, and that they
// came the way prefer asks: by the endpoint's descriptor when it is
// empty, else by that LMT backend.
func sendFromArena(p launch.Proc, prefer string) error {
	ep, err := nemesis.JoinProc(p, &nemesis.Options{ArenaSize: transferSize})
	if err != nil {
		return err
	}
	defer ep.Close()
	o := attach.Options{}
	if prefer != "" {
		o.Prefer = []string{prefer}
	}
	l, err := attach.Attach(ep, o)
	if err != nil {
		return err
	}
	defer l.Close()
	if p.Rank == 0 {
		b, err := ep.Alloc(transferSize)
		if err != nil {
			return err
		}
		for i := range b { // no memcopy.Copy: only the transfer counts
			b[i] = byte(i * 7)
		}
		if err := ep.Send(1, 0, b); err != nil {
			return err
		}
		_, err = ep.Recv(1, 1, nil)
		return err
	}
	buf := make([]byte, transferSize)
	var r nemesis.Request
	if err := ep.Irecv(&r, 0, 0, buf); err != nil {
		return err
	}
	if err := ep.Wait(&r); err != nil {
		return err
	}
	for i, c := range buf {
		if c != byte(i*7) {
			return fmt.Errorf("byte %d is %d, want %d", i, c, byte(i*7))
		}
	}
	st, viaLMT := attach.Stats(&r)
	est := ep.Stats()
	switch {
	case prefer == "" && (viaLMT || est.ArenaRecvs != 1 || est.ArenaBytes != transferSize):
		return fmt.Errorf("receive: via the LMT %v, endpoint stats %+v; want one descriptor and %d bytes copied", viaLMT, est, transferSize)
	case prefer != "" && (st.Backend != prefer || st.Syscalls != 0 || est.ArenaRecvs != 0):
		return fmt.Errorf("receive stats %+v, endpoint stats %+v; want the %s backend and no system call", st, est, prefer)
	}
	return ep.Send(0, 1, nil)
}
