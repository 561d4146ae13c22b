package knem

// A FlagDMA copy split over several DMA channels: softdma loaded again with
// 1, 2 and 4 channels, the bytes each channel moved counted exactly, the
// data checked by checksum and guard bytes, one channel failing or
// stalling while the others run.

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/vmpin"
)

// envSoftdmaReload names the program the CI guests' init provides to load
// softdma again with N channels (and knem after it).
const envSoftdmaReload = "KNEMESIS_SOFTDMA_RELOAD"

// splitMin is the module's default dma_split_min.
const splitMin = 64 << 10

// reloadSoftdma loads softdma again with n channels (0: its default), and
// knem after it. No descriptor of this process may be open.
func reloadSoftdma(t *testing.T, n int) {
	t.Helper()
	args := []string{}
	if n > 0 {
		args = append(args, strconv.Itoa(n))
	}
	out, err := exec.Command(os.Getenv(envSoftdmaReload), args...).CombinedOutput()
	if err != nil {
		refcnt, _ := os.ReadFile("/sys/module/knem/refcnt")
		t.Fatalf("%s %v: %v: %s (knem refcnt %s)", os.Getenv(envSoftdmaReload), args, err,
			out, strings.TrimSpace(string(refcnt)))
	}
}

// setParam writes a module parameter and returns its error.
func setParam(module, name, value string) error {
	return os.WriteFile("/sys/module/"+module+"/parameters/"+name, []byte(value), 0)
}

func mustParam(t *testing.T, module, name, value string) {
	t.Helper()
	if err := setParam(module, name, value); err != nil {
		t.Fatalf("%s.%s=%s: %v", module, name, value, err)
	}
}

// dmaStats are the driver's counters a split copy changes, and what it
// charged to this process.
type dmaStats struct {
	counters map[string]int64
	chans    []int64 // bytes per channel of the driver's table
	vmPin    uint64  // this process's pinned_vm in bytes (knem_account.c)
}

// vmPin is this process's pinned_vm in bytes (VmPin).
func vmPin(t *testing.T) uint64 {
	t.Helper()
	n, err := vmpin.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var chanLine = regexp.MustCompile(`^dma channel (\d+) (\S+) bytes: (\d+)$`)

func readDMAStats(t *testing.T) dmaStats {
	t.Helper()
	text, err := Stats()
	if err != nil {
		t.Fatal(err)
	}
	s := dmaStats{counters: map[string]int64{}, vmPin: vmPin(t)}
	for _, l := range strings.Split(text, "\n") {
		if m := chanLine.FindStringSubmatch(l); m != nil {
			i, _ := strconv.Atoi(m[1])
			if i != len(s.chans) {
				t.Fatalf("statistics list channel %d after %d channels:\n%s", i, len(s.chans), text)
			}
			v, _ := strconv.ParseInt(m[3], 10, 64)
			s.chans = append(s.chans, v)
			continue
		}
		k, v, ok := strings.Cut(l, ": ")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			s.counters[k] = n
		}
	}
	for _, k := range []string{"dma channels", "bytes dma", "copies dma", "copies failed",
		"dma copies split", "dma timeouts", "pinned pages"} {
		if _, ok := s.counters[k]; !ok {
			t.Fatalf("statistics lack %q:\n%s", k, text)
		}
	}
	return s
}

// since is what changed from before to s: counters, and per channel bytes
// sorted (which channel takes the first lane depends on the CPU).
func (s dmaStats) since(t *testing.T, before dmaStats) (map[string]int64, []int64) {
	t.Helper()
	if len(s.chans) != len(before.chans) {
		t.Fatalf("the driver's channel table changed from %d to %d channels", len(before.chans), len(s.chans))
	}
	d := map[string]int64{}
	for k, v := range s.counters {
		d[k] = v - before.counters[k]
	}
	chans := make([]int64, len(s.chans))
	for i := range s.chans {
		chans[i] = s.chans[i] - before.chans[i]
	}
	slices.Sort(chans)
	return d, chans
}

// wantLanes is the bytes each channel should move, sorted, when src is
// copied to dst over nchans channels: one lane per splitMin bytes, up to
// nchans; lane k ends at the first piece boundary at or past k+1 equal
// shares, a piece boundary being where a page or a buffer of either side
// ends.
func wantLanes(src, dst [][]byte, nchans, ntable int) []int64 {
	length := int(total(src))
	boundary := make([]bool, length+1)
	for _, side := range [][][]byte{src, dst} {
		pos := 0
		for _, b := range side {
			boundary[pos] = true
			for i := range b {
				if uintptr(unsafe.Pointer(&b[i]))%uintptr(os.Getpagesize()) == 0 {
					boundary[pos+i] = true
				}
			}
			pos += len(b)
		}
	}
	boundary[length] = true
	lanes := nLanes(length, nchans)
	out := make([]int64, ntable)
	start := 0
	for k := range lanes {
		end := length
		if k+1 < lanes {
			end = length * (k + 1) / lanes
			for !boundary[end] {
				end++
			}
		}
		out[k] = int64(end - start)
		start = end
	}
	slices.Sort(out)
	return out
}

// nLanes is how many channels a copy of length bytes takes.
func nLanes(length, nchans int) int { return max(min(length/splitMin, nchans), 1) }

// pageBuf is n bytes starting off bytes into a fresh anonymous mapping,
// with fill bytes everywhere else in the mapping.
type pageBuf struct {
	all  []byte
	body []byte
	off  int
}

func newPageBuf(t *testing.T, off, n int) pageBuf {
	page := os.Getpagesize()
	all := mmapBytes(t, (off+n+page-1)/page*page+page, unix.PROT_READ|unix.PROT_WRITE)
	for i := range all {
		all[i] = fill
	}
	return pageBuf{all: all, body: all[off : off+n], off: off}
}

// check asserts that the body holds want and every other byte the fill.
func (b pageBuf) check(t *testing.T, what string, want []byte) {
	t.Helper()
	if checksum(b.body) != checksum(want) {
		t.Errorf("%s: %d bytes with checksum %#x, want %#x (first difference at %d)",
			what, len(want), checksum(b.body), checksum(want), firstDiff(b.body, want))
	}
	for i, c := range b.all {
		if (i < b.off || i >= b.off+len(b.body)) && c != fill {
			t.Errorf("%s: byte %d of the mapping written, outside the %d bytes at %d", what, i, len(b.body), b.off)
			return
		}
	}
}

var dmaFlavours = []struct {
	name  string
	flags Flags
}{
	{"sync", FlagDMA},
	{"dmathread", FlagDMA | FlagDMAThread},
	{"asyncdmacomplete", FlagDMA | FlagAsyncDMAComplete},
}

// dmaCopy reads the region into dst with flags and returns the final status.
func dmaCopy(t *testing.T, d *Device, s *StatusArray, c Cookie, dst [][]byte, flags Flags) Status {
	t.Helper()
	slot, ok := s.Alloc()
	if !ok {
		t.Fatal("no free status slot")
	}
	defer s.Free(slot)
	st, err := d.InlineCopy(Read, dst, c, 0, All, flags, slot)
	if err != nil {
		t.Fatalf("INLINE_COPY flags %#x: %v (a failed DMA copy is a status, never an errno)", flags, err)
	}
	if st == StatusPending && flags&(FlagDMAThread|FlagAsyncDMAComplete) != 0 {
		if st, err = s.Wait(slot, 30*time.Second); err != nil {
			t.Fatalf("flags %#x: %v", flags, err)
		}
	}
	return st
}

// waitPinned waits for the driver's pinned pages, and this process's
// pinned_vm, to come back to what they were before a copy: an
// asynchronous copy unpins its local buffer just after its slot.
func waitPinned(t *testing.T, before dmaStats, what string) {
	t.Helper()
	var now dmaStats
	for range 500 {
		now = readDMAStats(t)
		if now.counters["pinned pages"] == before.counters["pinned pages"] && now.vmPin == before.vmPin {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: the driver holds %d pages pinned and VmPin is %d bytes; before the copy %d and %d",
		what, now.counters["pinned pages"], now.vmPin, before.counters["pinned pages"], before.vmPin)
}

// copyShape is a split copy: its length, where the source and the
// destination start in their first pages, and where each side's buffer is
// cut into iovecs (none: one buffer).
type copyShape struct {
	length, srcOff, dstOff int
	srcCuts, dstCuts       []int
}

func (c copyShape) String() string {
	if c.srcCuts == nil && c.dstCuts == nil {
		return fmt.Sprintf("%d@%d,%d", c.length, c.srcOff, c.dstOff)
	}
	return fmt.Sprintf("%d@%d,%d-iovecs%v%v", c.length, c.srcOff, c.dstOff, c.srcCuts, c.dstCuts)
}

// splitCase copies a shape with each flavour and checks data, guards and
// what each channel moved.
func splitCase(t *testing.T, nchans int, shape copyShape) {
	d := open(t)
	s := mapStatus(t, d)
	length := shape.length
	src := newPageBuf(t, shape.srcOff, length)
	copy(src.body, payload(uint64(length+shape.srcOff), length))
	srcIov := split(src.body, shape.srcCuts...)
	c := region(t, d, srcIov, ProtRead, 0)
	for _, f := range dmaFlavours {
		dst := newPageBuf(t, shape.dstOff, length)
		dstIov := split(dst.body, shape.dstCuts...)
		before := readDMAStats(t)
		if st := dmaCopy(t, d, s, c, dstIov, f.flags); st != StatusSuccess {
			t.Fatalf("%s: status %v", f.name, st)
		}
		dst.check(t, f.name, src.body)
		waitPinned(t, before, f.name)
		delta, chans := readDMAStats(t).since(t, before)
		want := wantLanes(srcIov, dstIov, nchans, len(before.chans))
		if !slices.Equal(chans, want) {
			t.Errorf("%s: %d bytes over %d channels: bytes per channel %v, want %v", f.name, length, nchans, chans, want)
		} else {
			t.Logf("%s: bytes per channel %v", f.name, chans)
		}
		split := int64(0)
		if nLanes(length, nchans) > 1 {
			split = 1
		}
		if delta["copies dma"] != 1 || delta["bytes dma"] != int64(length) || delta["dma copies split"] != split {
			t.Errorf("%s: copies dma +%d, bytes dma +%d, dma copies split +%d; want +1, +%d, +%d",
				f.name, delta["copies dma"], delta["bytes dma"], delta["dma copies split"], length, split)
		}
	}
}

// faultCase makes channel faulty fail (or stall) every descriptor it
// runs: each flavour's copy fails as a one-channel copy fails, with status
// FAILED and no errno, nothing is counted to any channel, every page the
// copy pinned is released, and the next copy succeeds.
func faultCase(t *testing.T, nchans, faulty int, knob string) {
	d := open(t)
	s := mapStatus(t, d)
	length := nchans * splitMin
	src := newPageBuf(t, 0, length+4096)
	copy(src.body, payload(uint64(nchans), len(src.body)))
	c := region(t, d, [][]byte{src.body}, ProtRead, 0)
	mustParam(t, "softdma", "fault_channel", strconv.Itoa(faulty))
	t.Cleanup(func() {
		setParam("softdma", knob, "0")
		setParam("softdma", "fault_channel", "-1")
		setParam("knem", "dma_timeout_ms", "10000")
	})
	if knob == "stall" {
		mustParam(t, "knem", "dma_timeout_ms", "300")
	}
	for _, f := range dmaFlavours {
		dst := newPageBuf(t, 0, length)
		before := readDMAStats(t)
		mustParam(t, "softdma", knob, "1")
		st := dmaCopy(t, d, s, c, [][]byte{dst.body}, f.flags)
		mustParam(t, "softdma", knob, "0")
		if st != StatusFailed {
			t.Fatalf("%s: channel %d of %d with %s=1: status %v, want %v", f.name, faulty, nchans, knob, st, StatusFailed)
		}
		waitPinned(t, before, f.name+" after the failed copy")
		delta, chans := readDMAStats(t).since(t, before)
		wantTimeouts := int64(0)
		if knob == "stall" {
			wantTimeouts = 1
		}
		if delta["copies failed"] != 1 || delta["bytes dma"] != 0 || delta["dma copies split"] != 0 ||
			delta["dma timeouts"] != wantTimeouts || slices.Max(chans) != 0 {
			t.Errorf("%s: copies failed +%d, bytes dma +%d, split +%d, timeouts +%d, channel bytes %v; want +1, 0, 0, +%d, none",
				f.name, delta["copies failed"], delta["bytes dma"], delta["dma copies split"],
				delta["dma timeouts"], chans, wantTimeouts)
		}
		// The channels run again: the same copy succeeds, on all of them.
		before = readDMAStats(t)
		if st := dmaCopy(t, d, s, c, [][]byte{dst.body}, f.flags); st != StatusSuccess {
			t.Fatalf("%s: the copy after the fault: status %v", f.name, st)
		}
		dst.check(t, f.name+" after the fault", src.body[:length])
		_, chans = readDMAStats(t).since(t, before)
		if want := wantLanes([][]byte{src.body[:length]}, [][]byte{dst.body}, nchans, len(chans)); !slices.Equal(chans, want) {
			t.Errorf("%s after the fault: bytes per channel %v, want %v", f.name, chans, want)
		}
	}
}

func TestDMAChannels(t *testing.T) {
	d := open(t)
	needDMA(t, d)
	d.Close() // the modules are unloaded below
	if os.Getenv(envSoftdmaReload) == "" {
		if inGuest {
			t.Fatalf("the guest's init sets no %s: it must say how to load softdma again", envSoftdmaReload)
		}
		t.Skipf("lacks softdma-reload: loading softdma again with other channel counts needs %s (set by the CI guests' init)", envSoftdmaReload)
	}
	if os.Geteuid() != 0 {
		t.Fatal("loading modules needs root")
	}
	t.Cleanup(func() { reloadSoftdma(t, 0) })
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("softdma-%d", n), func(t *testing.T) {
			reloadSoftdma(t, n)
			if got, err := DMAChannels(); got != n || err != nil {
				t.Fatalf("DMAChannels() = %d, %v with softdma nr_channels=%d", got, err, n)
			}
			page := os.Getpagesize()
			long := (16*n+5)*page + 333
			for _, c := range []copyShape{
				{length: 16 * n * page},                                // whole pages, an equal share each
				{length: (16*n + 3) * page},                            // pages that do not divide evenly
				{length: (16*n+1)*page + 777, srcOff: 1, dstOff: 3},    // neither side page aligned
				{length: (16*n+2)*page - 5, srcOff: 4000, dstOff: 100}, // pages cut far apart
				{length: 5 * page},                                     // too short to split
				// iovecs cut inside pages, differently on each side
				{length: long, srcOff: 7, srcCuts: []int{long / 3, long/3 + 1, long / 2},
					dstCuts: []int{page - 1, long / 5, long - 4097}},
			} {
				t.Run(c.String(), func(t *testing.T) { splitCase(t, n, c) })
			}
			// Each channel in turn, whichever lane it takes: the lane
			// on the calling CPU's channel is no different.
			for k := range n {
				t.Run(fmt.Sprintf("fail_every-channel%d", k), func(t *testing.T) { faultCase(t, n, k, "fail_every") })
			}
			t.Run("stall", func(t *testing.T) { faultCase(t, n, n-1, "stall") })
			t.Run("unpinned", func(t *testing.T) { waitUnpinned(t, "after the split copies") })
		})
	}
	t.Run("dma_channels", func(t *testing.T) {
		reloadSoftdma(t, 4)
		wantErrno(t, "dma_channels=33", setParam("knem", "dma_channels", "33"), unix.EINVAL)
		wantErrno(t, "dma_split_min=4095", setParam("knem", "dma_split_min", "4095"), unix.EINVAL)
		mustParam(t, "knem", "dma_channels", "2")
		t.Cleanup(func() { setParam("knem", "dma_channels", "0") })
		if got, err := DMAChannels(); got != 2 || err != nil {
			t.Fatalf("DMAChannels() = %d, %v with dma_channels=2 of 4", got, err)
		}
		splitCase(t, 2, copyShape{length: 64 * os.Getpagesize()})
	})
}

// BenchmarkDMAChannels alternates one FlagDMA copy on a single channel
// (dma_channels=1) and one over every channel (dma_channels=0) of the same
// bytes per iteration, so that both see the same load, and reports the
// median throughput of each and their ratio (all/one > 1: splitting pays).
// softdma copies with the CPU, and the QEMU guests run their vCPUs one at
// a time: there the ratio shows the cost of splitting, not its gain.
func BenchmarkDMAChannels(b *testing.B) {
	d := open(b)
	needDMA(b, d)
	nch, err := DMAChannels()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{256 << 10, 1 << 20, 4 << 20} {
		b.Run(sizeName(n), func(b *testing.B) {
			src := payload(1, n)
			dst := make([]byte, n)
			copy(dst, src) // fault the pages in before timing
			c := region(b, d, [][]byte{src}, ProtRead, 0)
			local := [][]byte{dst}
			b.Cleanup(func() { setParam("knem", "dma_channels", "0") })
			copyOn := func(channels string) time.Duration {
				if err := setParam("knem", "dma_channels", channels); err != nil {
					b.Fatalf("knem.dma_channels=%s (needs root): %v", channels, err)
				}
				t0 := time.Now()
				st, err := d.InlineCopy(Read, local, c, 0, All, FlagDMA, 0)
				if err != nil || st != StatusSuccess {
					b.Fatalf("DMA copy on dma_channels=%s: %v, %v", channels, st, err)
				}
				return time.Since(t0)
			}
			var one, all []time.Duration
			for b.Loop() {
				one = append(one, copyOn("1"))
				all = append(all, copyOn("0"))
			}
			mo, ma := median(one), median(all)
			b.ReportMetric(float64(n)/mo.Seconds()/1e6, "one-MB/s")
			b.ReportMetric(float64(n)/ma.Seconds()/1e6, "all-MB/s")
			b.ReportMetric(mo.Seconds()/ma.Seconds(), "all/one")
			b.ReportMetric(float64(nch), "channels")
		})
	}
}
