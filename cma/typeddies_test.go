package cma_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/internal/exitwait"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestTypedSenderDies: the sender of a vector of 8-byte blocks exits once
// the receiver, reading into a vector of its own, has copied its first
// chunk; the receiver then fails with a PeerError naming rank 0, and no
// byte between its blocks is written.
func TestTypedSenderDies(t *testing.T) {
	job := lmttest.NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: time.Minute, ExitEarly: []int{0}}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, lmt.CMA, nil)
		if err != nil {
			return err
		}
		typ, err := datatype.Vector(8<<20, 8, 16) // 64 MiB in 128 MiB
		if err != nil {
			return err
		}
		base := make([]byte, typ.Extent())
		rts := make([]byte, 4096)
		if p.Rank == 0 {
			_, n, err := eng.StartSendType(1, base, typ, lmt.CMA, rts)
			if err != nil {
				return err
			}
			if err := ch.SendRTS(1, rts[:n]); err != nil {
				return err
			}
			if _, err := ch.NextMsg(1); err != nil { // the receiver has started
				return err
			}
			os.Exit(0)
		}
		for i := range base {
			base[i] = 0xa5
		}
		r, err := ch.NextRTS(0)
		if err != nil {
			return err
		}
		tr, err := eng.StartRecvType(0, r, base, typ)
		if err != nil {
			return err
		}
		if err := eng.Progress(); err != nil || tr.Moved() == 0 || tr.Done() {
			return fmt.Errorf("first chunk: %v, %d bytes moved, done %v", err, tr.Moved(), tr.Done())
		}
		if err := ch.SendMsg(0, []byte{1}); err != nil {
			return err
		}
		if err := awaitExit(ch.PeerPID(0)); err != nil {
			return err
		}
		err = ch.Wait(tr)
		var pe *lmt.PeerError
		if !errors.As(err, &pe) || pe.Rank != 0 || !errors.Is(err, lmt.ErrPeerGone) {
			return fmt.Errorf("receiver: %v, want a PeerError for rank 0", err)
		}
		for off := int64(8); off < typ.Extent(); off += 16 {
			for _, b := range base[off : off+8] {
				if b != 0xa5 {
					return fmt.Errorf("byte between blocks at %d written (%#x)", off, b)
				}
			}
		}
		return nil
	})
}

// awaitExit waits until process pid has exited (a zombie has no memory
// left to read either).
func awaitExit(pid int) error { return exitwait.Wait(pid) }
