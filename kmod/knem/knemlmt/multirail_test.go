package knemlmt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/knemesis/knemesis/cma" // multirail-knem's read and write rails
	"github.com/knemesis/knemesis/internal/await"
	"github.com/knemesis/knemesis/internal/vmpin"
	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/kmod/knem/knemlmt"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// multirail-knem in the guests: the receiver's process_vm_readv, the
// sender's process_vm_writev and the module's copier (its kernel thread,
// or softdma's channels) move one message at once.

// railMsg is the message of these tests, 4 MiB + 12345 bytes, and its
// buffers on each side: entries of other lengths, an empty one, each
// boundary of the first cut inside an entry on both sides.
const railMsg = 4<<20 + 12345

var (
	railSend = []int{5000, 1<<20 + 7, 0, 1<<20 + 300000, railMsg - 5000 - (1<<20 + 7) - (1<<20 + 300000)}
	railRecv = []int{777777, 0, 1500000, railMsg - 777777 - 1500000}
)

// The first message of an engine is cut in thirds (no rail measured yet),
// each boundary down to its page: 1402216.33 and 2804432.67 bytes.
const firstReadEnd, firstWriteFrom = 1400832, 2801664

var firstRails = [lmt.NumRails]int64{lmt.ReadRail: firstReadEnd, lmt.KnemRail: firstWriteFrom - firstReadEnd, lmt.WriteRail: railMsg - firstWriteFrom}

// driverCounters reads counters of the module's statistics.
func driverCounters(names ...string) (map[string]int64, error) {
	text, err := knem.Stats()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(l, ": ")
		for _, n := range names {
			if k == n {
				out[n], err = strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("driver statistic %q: %w", l, err)
				}
			}
		}
	}
	if len(out) != len(names) {
		return nil, fmt.Errorf("driver statistics have %v of %v:\n%s", out, names, text)
	}
	return out, nil
}

// railTransfer moves one message of railMsg bytes from rank 0 to rank 1 on
// multirail-knem and returns this rank's transfer and its error; the
// receiver's buffer is checked (content and guard bytes) when it
// succeeded.
func railTransfer(ch *lmttest.Channel, eng *lmt.Engine) (*lmt.Transfer, error) {
	rts := make([]byte, 4096)
	if ch.Rank == 0 {
		b := lmttest.NewSplitBuffer(1, railSend)
		b.FillMessage()
		t, n, err := eng.StartSend(1, b.Iov, lmt.MultiRailKnem, rts)
		if err != nil {
			return nil, err
		}
		if err := ch.SendRTS(1, rts[:n]); err != nil {
			return nil, err
		}
		return t, ch.Wait(t)
	}
	r, err := ch.NextRTS(0)
	if err != nil {
		return nil, err
	}
	b := lmttest.NewSplitBuffer(3, railRecv)
	t, err := eng.StartRecv(0, r, b.Iov)
	if err != nil {
		return nil, err
	}
	if err := ch.Wait(t); err != nil {
		return t, err
	}
	return t, b.Verify(railMsg)
}

// TestMultiRailKnem: three messages over the three rails, on the kernel
// thread and on softdma's channels. The first is cut in thirds at bytes
// inside iovec entries on both sides, and both sides report exactly those
// bytes per rail; the later ones are cut by what the receiver measured,
// every rail moving some of each. Every byte arrives (checksum, guard
// bytes), and the module made one copy per message, on the rail's copier.
func TestMultiRailKnem(t *testing.T) {
	eachPolicy(t, func(t *testing.T) {
		copier, bytes := "copies kthread", "bytes kthread"
		if strings.Contains(t.Name(), "dma") {
			copier, bytes = "copies dma", "bytes dma"
		}
		job := lmttest.NewJob(2)
		launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: 3 * time.Minute}, func(p launch.Proc) error {
			ch, eng, err := lmttest.Open(p, lmt.MultiRailKnem, nil)
			if err != nil {
				return err
			}
			defer ch.Close()
			before, err := driverCounters(copier, bytes, "copies cpu")
			if err != nil {
				return err
			}
			const messages = 3
			var knemBytes int64
			for i := range messages {
				tr, err := railTransfer(ch, eng)
				if err != nil {
					return fmt.Errorf("message %d: %w", i, err)
				}
				st := tr.Stats()
				switch {
				case st.Backend != lmt.MultiRailKnem || st.Bytes != railMsg:
					return fmt.Errorf("message %d: %+v, want %d bytes by %s", i, st, railMsg, lmt.MultiRailKnem)
				case i == 0 && st.Rails != firstRails:
					return fmt.Errorf("first message: rails %v, want thirds %v", st.Rails, firstRails)
				case st.Rails[lmt.ReadRail] <= 0 || st.Rails[lmt.KnemRail] <= 0 || st.Rails[lmt.WriteRail] <= 0 ||
					st.Rails[lmt.ReadRail]+st.Rails[lmt.KnemRail]+st.Rails[lmt.WriteRail] != railMsg:
					return fmt.Errorf("message %d: rails %v, want each some of the %d bytes", i, st.Rails, railMsg)
				}
				knemBytes += st.Rails[lmt.KnemRail]
			}
			if p.Rank == 0 {
				return nil
			}
			after, err := driverCounters(copier, bytes, "copies cpu")
			if err != nil {
				return err
			}
			if d, b := after[copier]-before[copier], after[bytes]-before[bytes]; d != messages || b != knemBytes || after["copies cpu"] != before["copies cpu"] {
				return fmt.Errorf("%s +%d, %s +%d, copies cpu +%d; want +%d, +%d (the knem rail's pieces) and none",
					copier, d, bytes, b, after["copies cpu"]-before["copies cpu"], messages, knemBytes)
			}
			return nil
		})
	}, "async", "dma-async")
}

// waitVmPin waits for this process's VmPin to come back to want, and
// fails only when it stops moving for a whole stall interval.
func waitVmPin(want uint64) error {
	var got uint64
	err := await.Poll{Stall: launchtest.DefaultTimeout, MinSleep: time.Millisecond, MaxSleep: 50 * time.Millisecond}.Until(context.Background(),
		func() (uint64, bool, error) {
			var err error
			got, err = vmpin.Bytes()
			return got, got == want, err
		})
	if err != nil {
		return fmt.Errorf("VmPin %d bytes, %d before the transfer: %w", got, want, err)
	}
	return nil
}

// TestMultiRailKnemFails: softdma fails every second descriptor of each
// channel while the knem rail's DMA copy runs, halfway through its piece.
// The receiver fails with the rail's error, naming its piece; the sender
// with the receiver's, while its write rail was moving; neither process
// keeps a page pinned (VmPin back), the module no region of theirs, nor
// any page; and the next message over the same engines arrives whole.
func TestMultiRailKnemFails(t *testing.T) {
	if !needDevice(t) {
		t.Skip("lacks knem-dma: needs a DMA channel (the guests load softdma, whose failure injection this test uses)")
	}
	knemlmt.SetPolicy(knemlmt.Policy{AsyncMin: 1, DMA: func(int) bool { return true }, NoCache: true})
	defer knemlmt.SetPolicy(knemlmt.Policy{})
	failEvery := func(v string) error {
		return os.WriteFile("/sys/module/softdma/parameters/fail_every", []byte(v), 0)
	}
	t.Cleanup(func() { failEvery("0") })
	job := lmttest.NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: 3 * time.Minute}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, lmt.MultiRailKnem, nil)
		if err != nil {
			return err
		}
		defer ch.Close()
		counters := []string{"regions created", "regions destroyed", "pinned pages", "copies failed"}
		before, err := driverCounters(counters...)
		if err != nil {
			return err
		}
		pinned, err := vmpin.Bytes()
		if err != nil {
			return err
		}
		if err := ch.Barrier(); err != nil { // both read before any region
			return err
		}
		if p.Rank == 1 {
			if err := failEvery("2"); err != nil {
				return err
			}
		}
		tr, err := railTransfer(ch, eng)
		if p.Rank == 1 {
			if ferr := failEvery("0"); ferr != nil {
				return ferr
			}
		}
		async := fmt.Sprintf("lmt: the knem rail's piece [%d, %d) from rank 0: knemlmt: copy from rank 0 failed in the driver", firstReadEnd, firstWriteFrom)
		sync := fmt.Sprintf("lmt: the knem rail's piece [%d, %d) from rank 0: knemlmt: copy of %d bytes from rank 0 failed in the driver", firstReadEnd, firstWriteFrom, firstWriteFrom-firstReadEnd)
		var remote *lmt.RemoteError
		switch {
		case tr == nil:
			return fmt.Errorf("no transfer: %v", err)
		case p.Rank == 1 && (err == nil || err.Error() != async && err.Error() != sync):
			return fmt.Errorf("receive: %v, want %s", err, async)
		case p.Rank == 0 && (!errors.As(err, &remote) || remote.Rank != 1 || remote.Msg != async && remote.Msg != sync):
			return fmt.Errorf("send: %v, want rank 1's %s", err, async)
		}
		if err := waitVmPin(pinned); err != nil {
			return fmt.Errorf("rank %d after the failure: %w", p.Rank, err)
		}
		// Both sides are over: the sender has withdrawn its region.
		if err := ch.Barrier(); err != nil {
			return err
		}
		after, err := driverCounters(counters...)
		if err != nil {
			return err
		}
		live := func(c map[string]int64) int64 { return c["regions created"] - c["regions destroyed"] }
		if live(after) != live(before) || after["pinned pages"] != before["pinned pages"] || after["copies failed"] != before["copies failed"]+1 {
			return fmt.Errorf("rank %d: module regions alive %d, pinned pages %d, copies failed +%d; want %d, %d as before, and one failed copy",
				p.Rank, live(after), after["pinned pages"], after["copies failed"]-before["copies failed"], live(before), before["pinned pages"])
		}
		if err := ch.Barrier(); err != nil {
			return err
		}
		if _, err := railTransfer(ch, eng); err != nil {
			return fmt.Errorf("the message after the failure: %w", err)
		}
		return nil
	})
}
