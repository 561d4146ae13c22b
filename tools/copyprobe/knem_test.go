package copyprobe_test

// The knem module's transfers: one kernel copy with the CPU, none on the
// CPU and one by DMA with the soft DMA provider. The module cannot load on
// this project's host (no module support), so these run in the QEMU guests
// of ci/test-kernel.sh, which set KNEMESIS_KCI=1: there a missing capability
// fails instead of skipping.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/knemtest"
	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/copyprobe"
)

var inGuest = knemtest.InGuest()

// needKnem skips where the module is truly absent, and fails in the guest.
func needKnem(t *testing.T, dma bool) {
	t.Helper()
	if _, child := launch.Self(); child {
		return
	}
	if d := knemtest.Open(t); dma && !knemtest.HasDMA(t, d) {
		t.Skip("lacks knem-dma: knem reports no DMA channel on this machine (GET_INFO features lack DMA)")
	}
}

// knemControlBytes is what knemExpose and knemRead move through pipes: the
// 8-byte cookie and a 1-byte acknowledgement, each written and read once.
const knemControlBytes = 2 * (8 + 1)

// knemExpose declares the payload as a region, sends its cookie on ctl and
// keeps it until the reader acknowledges on ack.
func knemExpose(ctl, ack *os.File, seed uint64) error {
	d, err := knem.Open()
	if err != nil {
		return err
	}
	defer d.Close()
	buf := payload(transferSize, seed)
	cookie, err := d.CreateRegion([][]byte{buf}, knem.ProtRead, knem.FlagSingleUse)
	if err != nil {
		return err
	}
	var msg [8]byte
	binary.LittleEndian.PutUint64(msg[:], uint64(cookie))
	if _, err := ctl.Write(msg[:]); err != nil {
		return fmt.Errorf("sending the cookie: %w", err)
	}
	if _, err := io.ReadFull(ack, msg[:1]); err != nil {
		return fmt.Errorf("waiting for the reader: %w", err)
	}
	return nil
}

// knemRead copies the peer's region into its buffer with one inline copy,
// by the CPU or, with flags knem.FlagDMA, by the DMA engine.
func knemRead(ctl, ack *os.File, seed uint64, flags knem.Flags) error {
	d, err := knem.Open()
	if err != nil {
		return err
	}
	defer d.Close()
	var msg [8]byte
	if _, err := io.ReadFull(ctl, msg[:]); err != nil {
		return fmt.Errorf("reading the cookie: %w", err)
	}
	cookie := knem.Cookie(binary.LittleEndian.Uint64(msg[:]))
	buf := make([]byte, transferSize)
	var status *knem.StatusArray
	var slot knem.Slot
	if flags&knem.FlagDMA != 0 {
		if status, err = d.MapStatus(1); err != nil {
			return err
		}
		defer status.Unmap()
		var ok bool
		if slot, ok = status.Alloc(); !ok {
			return errors.New("no free status slot")
		}
	}
	st, err := d.InlineCopy(knem.Read, [][]byte{buf}, cookie, 0, knem.All, flags, slot)
	if err != nil {
		return err
	}
	if st == knem.StatusPending {
		if st, err = status.Wait(slot, 30*time.Second); err != nil {
			return err
		}
	}
	if st != knem.StatusSuccess {
		return fmt.Errorf("inline copy: status %v", st)
	}
	if _, err := ack.Write([]byte{1}); err != nil {
		return fmt.Errorf("acknowledging: %w", err)
	}
	return checkPayload(buf, seed)
}

func knemJob(seed uint64, flags knem.Flags) job {
	return job{
		files: func(t *testing.T) ([]*os.File, []*os.File) {
			ctl0, ctl1 := pipePair(4096)(t)
			ack0, ack1 := pipePair(4096)(t)
			return []*os.File{ctl0[0], ack1[0]}, []*os.File{ctl1[0], ack0[0]}
		},
		rank: func(p launch.Proc) error {
			if p.Rank == 0 {
				return knemExpose(extraFile(0), extraFile(1), seed)
			}
			return knemRead(extraFile(0), extraFile(1), seed, flags)
		},
	}
}

// checkKnem checks the module's exact counts in one report. In tracepoint
// mode the kernel total is exact too; in fentry mode it also holds the few
// page-cache bytes exec reads in the new ranks, and check bounds it to 2%.
func checkKnem(t *testing.T, r copyprobe.Report, moduleCPU, dma uint64) {
	t.Helper()
	if r.DMA.Mode != copyprobe.ModeModuleTracepoint || !r.DMA.Attached() {
		t.Fatalf("DMA copier: %v, want mode %q", r.DMA, copyprobe.ModeModuleTracepoint)
	}
	if r.Bytes.ModuleCPU != moduleCPU || r.Bytes.DMA != dma || r.Bytes.BadEngine != 0 {
		t.Errorf("knem counted %d CPU, %d DMA, %d unknown-engine bytes; want %d, %d, 0",
			r.Bytes.ModuleCPU, r.Bytes.DMA, r.Bytes.BadEngine, moduleCPU, dma)
	}
	if want := moduleCPU + knemControlBytes; r.Kernel.Mode == copyprobe.ModeTracepoint && r.Bytes.Kernel != want {
		t.Errorf("kernel bytes = %d, want exactly %d (the module's %d and %d control bytes)",
			r.Bytes.Kernel, want, moduleCPU, knemControlBytes)
	}
}

func TestKnemInlineCopyIsOneKernelCopy(t *testing.T) {
	needKnem(t, false)
	m, ok := run(t, knemJob(7, 0))
	if !ok {
		return
	}
	checkModes(t, m, expect{kernel: 1, dma: 0})
	t.Run("module", func(t *testing.T) {
		checkKnem(t, m.Tracepoint, transferSize, 0)
		if m.Fentry != nil {
			checkKnem(t, *m.Fentry, transferSize, 0)
		}
	})
}

func TestKnemDMAIsNoCPUCopy(t *testing.T) {
	needKnem(t, true)
	m, ok := run(t, knemJob(8, knem.FlagDMA))
	if !ok {
		return
	}
	checkModes(t, m, expect{kernel: 0, dma: 1})
	t.Run("module", func(t *testing.T) {
		checkKnem(t, m.Tracepoint, 0, transferSize)
		if c := m.Tracepoint.CopiesPerByte(transferSize); c.DMA != 1 {
			t.Errorf("DMA copies per byte = %v, want 1", c.DMA)
		}
		if m.Fentry != nil {
			checkKnem(t, *m.Fentry, 0, transferSize)
		}
	})
}
