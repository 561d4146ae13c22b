package nemesis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// scaleProcs is the size of the node-filling job: two 96-core sockets.
const scaleProcs = 192

// TestJob192 runs a job of 192 ranks on this small machine, oversubscribed,
// with the default geometry: a ring, then each rank with 3 random peers,
// then 190 ranks blocked in a receive while two ping-pong, then an
// all-to-all of 64 KiB messages (eager, through cells: no LMT is set) with
// checksums; then one rank dies without closing and every call aimed at it
// fails naming it. Rank 0 reports the segment's resident shared memory,
// measured with mincore(2), and the CPU the blocked ranks burnt; the parent
// checks that the job left nothing in /dev/shm.
func TestJob192(t *testing.T) {
	job := launch.NewJobName()
	launchtest.RunOpts(t, scaleProcs, launchtest.Options{Job: job, ExitEarly: []int{scaleProcs - 1}}, func(p launch.Proc) error {
		start := time.Now()
		// The default geometry and JoinTimeout: Join waits as long as
		// ranks keep joining, however long 192 processes started on a
		// few CPUs take to reach it.
		ep, err := JoinProc(p, nil)
		if err != nil {
			return err
		}
		if err := barrier(ep); err != nil {
			return err
		}
		if ep.Rank() == 0 {
			fmt.Printf("192 ranks joined in %v\n", time.Since(start).Round(time.Millisecond))
		}
		steps := []struct {
			name string
			fn   func(*Endpoint) error
		}{
			{"ring", ringPass},
			{"random peers", randomPeers},
			{"sleepers", sleepers},
			{"all-to-all", allToAll64K},
			{"dead rank", deadRank},
		}
		for _, s := range steps {
			launchtest.Progress()
			t0 := time.Now()
			if err := s.fn(ep); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			if ep.Rank() == 0 {
				fmt.Printf("%s: %v\n", s.name, time.Since(t0).Round(time.Millisecond))
			}
		}
		return ep.Close()
	})
	if left, _ := filepath.Glob("/dev/shm/*" + job + "*"); len(left) != 0 {
		t.Fatalf("left in /dev/shm after the job: %v", left)
	}
}

// ringPass sends a token around the ring twice, each rank adding its rank.
func ringPass(ep *Endpoint) error {
	n, r := ep.Size(), ep.Rank()
	var b [8]byte
	for lap := range 2 {
		if r == 0 {
			binary.LittleEndian.PutUint64(b[:], uint64(lap))
			if err := ep.Send(1, 10, b[:]); err != nil {
				return err
			}
		}
		if _, err := ep.Recv((r+n-1)%n, 10, b[:]); err != nil {
			return err
		}
		v := binary.LittleEndian.Uint64(b[:])
		if r == 0 {
			if want := uint64(lap) + uint64(n*(n-1)/2); v != want {
				return fmt.Errorf("lap %d: token %d back at rank 0, want %d", lap, v, want)
			}
			continue
		}
		binary.LittleEndian.PutUint64(b[:], v+uint64(r))
		if err := ep.Send((r+1)%n, 10, b[:]); err != nil {
			return err
		}
	}
	return barrier(ep)
}

// randomPeers: every rank sends 40 messages (enough to claim a fastbox set)
// to each of 3 peers drawn from a seed all ranks share, and receives from
// whoever drew it, with checksums.
func randomPeers(ep *Endpoint) error {
	const perPeer = 40
	n, me := ep.Size(), ep.Rank()
	rng := rand.New(rand.NewPCG(34, 192))
	peers := make([][]int, n)
	senders := 0
	for r := range peers {
		for len(peers[r]) < 3 {
			d := rng.IntN(n)
			if d != r && !contains(peers[r], d) {
				peers[r] = append(peers[r], d)
				if d == me {
					senders++
				}
			}
		}
	}
	sends := make([]Request, 3*perPeer)
	bufs := make([][]byte, len(sends))
	for i := range sends {
		d := peers[me][i%3]
		bufs[i] = make([]byte, 8+i%200)
		stamp(bufs[i], me, i/3)
		if err := ep.Isend(&sends[i], d, 11, bufs[i]); err != nil {
			return err
		}
	}
	next := make([]int, n)
	buf, want := make([]byte, 256), make([]byte, 256)
	for range senders * perPeer {
		st, err := ep.Recv(AnySource, 11, buf)
		if err != nil {
			return err
		}
		i := next[st.Source]
		next[st.Source]++
		k := slot(peers[st.Source], me)
		size := 8 + (3*i+k)%200
		stamp(want[:size], st.Source, i)
		if st.Len != size || crc32.ChecksumIEEE(buf[:size]) != crc32.ChecksumIEEE(want[:size]) {
			return fmt.Errorf("message %d from rank %d: %d bytes, want %d, or content differs", i, st.Source, st.Len, size)
		}
	}
	for i := range sends {
		if err := ep.Wait(&sends[i]); err != nil {
			return err
		}
	}
	if got := ep.Stats().FastboxSets; got != 3 {
		return fmt.Errorf("claimed %d fastbox sets for 3 busy peers, want 3", got)
	}
	return barrier(ep)
}

func contains(s []int, v int) bool { return slot(s, v) >= 0 }

func slot(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// sleepers: ranks 2.. block in a receive from rank 0 while ranks 0 and 1
// ping-pong until rank 0 has seen every one of them dozing (its sleep word
// set); then each reports the CPU time it used while blocked, and how
// often it dozed.
func sleepers(ep *Endpoint) error {
	const tag, limit = 12, time.Minute
	var b [16]byte
	switch ep.Rank() {
	case 0:
		rounds := 0
		dozed := make([]bool, ep.Size())
		missing := ep.Size() - 2
		t0 := time.Now()
		lastDozer := t0 // the last time one more rank was seen dozing
		for ; missing > 0; rounds++ {
			if err := ep.Send(1, tag, b[:8]); err != nil {
				return err
			}
			if _, err := ep.Recv(1, tag, b[:8]); err != nil {
				return err
			}
			if rounds%64 != 0 {
				continue
			}
			for r := 2; r < ep.Size(); r++ {
				if !dozed[r] && ep.seg.sleepWord(r).Load() != 0 {
					dozed[r] = true
					missing--
					lastDozer = time.Now()
				}
			}
			// A stall, not a deadline: on a loaded machine the ranks
			// reach their doze one by one, late.
			if missing > 0 && time.Since(lastDozer) > limit {
				return fmt.Errorf("%d blocked ranks not seen dozing: none more for %v", missing, limit)
			}
		}
		phase := time.Since(t0)
		// Now that all doze: what do they cost while they keep waiting,
		// once their naps have grown (about a second), over a second?
		var steady [3]time.Duration
		for i := range steady {
			if i > 0 {
				for t := time.Now(); time.Since(t) < time.Second; {
					if err := ep.Send(1, tag, b[:8]); err != nil {
						return err
					}
					if _, err := ep.Recv(1, tag, b[:8]); err != nil {
						return err
					}
				}
			}
			var err error
			if steady[i], err = procCPU(ep, 2); err != nil {
				return err
			}
		}
		fmt.Printf("sleepers: once all doze, the %d blocked ranks used %v of CPU in all over the next second, %v over the one after\n",
			ep.Size()-2, steady[1]-steady[0], steady[2]-steady[1])
		if err := ep.Send(1, tag+1, nil); err != nil {
			return err
		}
		for r := 2; r < ep.Size(); r++ {
			if err := ep.Send(r, tag, nil); err != nil {
				return err
			}
		}
		var cpu time.Duration
		var dozes, dozers uint64
		for range ep.Size() - 2 {
			if _, err := ep.Recv(AnySource, tag, b[:]); err != nil {
				return err
			}
			cpu += time.Duration(binary.LittleEndian.Uint64(b[:]))
			d := binary.LittleEndian.Uint64(b[8:])
			if dozes += d; d > 0 {
				dozers++
			}
		}
		fmt.Printf("sleepers: %d blocked ranks used %v of CPU in all while 2 ranks ping-ponged %d round trips in %v, until all were seen dozing; %d of them counted %d dozes in all\n",
			ep.Size()-2, cpu.Round(time.Millisecond), rounds, phase.Round(time.Millisecond), dozers, dozes)

	case 1:
		for {
			st, err := ep.Recv(0, AnyTag, b[:8])
			if err != nil {
				return err
			}
			if st.Tag != tag {
				break
			}
			if err := ep.Send(0, tag, b[:8]); err != nil {
				return err
			}
		}
	default:
		cpu0, dozes0 := cpuTime(), ep.Stats().Dozes
		if _, err := ep.Recv(0, tag, nil); err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(b[:], uint64(cpuTime()-cpu0))
		binary.LittleEndian.PutUint64(b[8:], ep.Stats().Dozes-dozes0)
		if err := ep.Send(0, tag, b[:]); err != nil {
			return err
		}
	}
	return barrier(ep)
}

// procCPU sums the CPU time (user and system, /proc/PID/stat, in clock
// ticks of 10 ms) of the ranks from first on.
func procCPU(ep *Endpoint, first int) (time.Duration, error) {
	var ticks int64
	for r := first; r < ep.Size(); r++ {
		pid, _ := ep.PeerPID(r)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		// Fields after the command name, which ends with the last ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		for _, i := range []int{11, 12} { // utime, stime: fields 14 and 15
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
			}
			ticks += v
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allToAll64K: every rank sends every other rank a 64 KiB message (4 KiB
// under the race detector, which checks synchronization, not bandwidth,
// and would take minutes over 2.4 GB of instrumented copies), in
// shifted pairs (step k: to rank+k, from rank-k), window steps at a time;
// every message is checked by CRC. Rank 0 then reports the segment's
// resident size and what else the job holds in /dev/shm.
func allToAll64K(ep *Endpoint) error {
	const window, tag = 8, 13
	size := allToAllSize
	n, me := ep.Size(), ep.Rank()
	out, in := make([][]byte, window), make([][]byte, window)
	for i := range out {
		out[i], in[i] = make([]byte, size), make([]byte, size)
	}
	want := make([]byte, size)
	sends, recvs := make([]Request, window), make([]Request, window)
	for k := 1; k < n; k += window {
		launchtest.Progress() // the job advances: see launchtest.Options.Timeout
		w := min(window, n-k)
		for j := range w {
			src, dst := (me-k-j+2*n)%n, (me+k+j)%n
			if err := ep.Irecv(&recvs[j], src, tag, in[j]); err != nil {
				return err
			}
			stamp(out[j], me, dst)
			if err := ep.Isend(&sends[j], dst, tag, out[j]); err != nil {
				return err
			}
		}
		for j := range w {
			if err := ep.Wait(&recvs[j]); err != nil {
				return err
			}
			src := (me - k - j + 2*n) % n
			stamp(want, src, me)
			if st := recvs[j].Status(); st.Source != src || st.Count != size || crc32.ChecksumIEEE(in[j]) != crc32.ChecksumIEEE(want) {
				return fmt.Errorf("%d-byte message from rank %d: source %d, %d bytes, or content differs", size, src, st.Source, st.Count)
			}
			if err := ep.Wait(&sends[j]); err != nil {
				return err
			}
		}
	}
	if me == 0 {
		held, err := ep.SharedMemory()
		if err != nil {
			return err
		}
		res, err := residentBytes(ep.seg.mem)
		if err != nil {
			return err
		}
		// The file's size is what Join asked for, on any host; what
		// the tmpfs allocated for it (held) depends on its accounting
		// and may be less, never more.
		var st unix.Stat_t
		if err := unix.Fstat(ep.seg.fd, &st); err != nil {
			return err
		}
		if need, _ := SegmentSize(n, nil); uint64(st.Size) != need || held > need {
			return fmt.Errorf("the segment is a %d-byte file holding %d bytes of /dev/shm; SegmentSize says %d, and no more may be held", st.Size, held, need)
		}
		if held > 1<<30 || st.Size > 1<<30 {
			return fmt.Errorf("the segment of %d ranks is %d bytes and holds %d of /dev/shm, more than 1 GiB", n, st.Size, held)
		}
		others, _ := filepath.Glob("/dev/shm/*" + ep.Job() + "*")
		fmt.Printf("all-to-all: the segment holds %d bytes (%.1f MiB) of /dev/shm, %.1f MiB of it written (mincore); other shared files of the job: %v\n",
			held, float64(held)/(1<<20), float64(res)/(1<<20), others)
	}
	return barrier(ep)
}

// residentBytes measures how much of mem is in memory (mincore(2)); for a
// tmpfs mapping that is what the segment holds in shared memory.
func residentBytes(mem []byte) (int, error) {
	page := os.Getpagesize()
	vec := make([]byte, (len(mem)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("mincore: %w", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n * page, nil
}

// deadRank: the last rank leaves without closing, as a crash does; every
// survivor's receive from it, and then its send to it, fail with a
// PeerError naming it, and the survivors still finish a barrier.
func deadRank(ep *Endpoint) error {
	victim := ep.Size() - 1
	if ep.Rank() == victim {
		os.Exit(0) // no Close: nemesis sees a crash
	}
	check := func(what string, err error) error {
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != victim || !errors.Is(err, ErrPeerDead) {
			return fmt.Errorf("%s: %v, want a PeerError naming rank %d", what, err, victim)
		}
		return nil
	}
	_, err := ep.Recv(victim, 14, nil)
	if err := check("Recv from the dead rank", err); err != nil {
		return err
	}
	if err := check("Send to the dead rank", ep.Send(victim, 14, []byte("late"))); err != nil {
		return err
	}
	return survivorsBarrier(ep, victim)
}

// survivorsBarrier is barrier without the dead rank (directed receives: a
// wildcard one fails once a rank crashed).
func survivorsBarrier(ep *Endpoint, dead int) error {
	const tag = MaxTag
	if ep.Rank() != 0 {
		if err := ep.Send(0, tag, nil); err != nil {
			return err
		}
		_, err := ep.Recv(0, tag, nil)
		return err
	}
	for r := 1; r < ep.Size(); r++ {
		if r == dead {
			continue
		}
		if _, err := ep.Recv(r, tag, nil); err != nil {
			return err
		}
	}
	for r := 1; r < ep.Size(); r++ {
		if r == dead {
			continue
		}
		if err := ep.Send(r, tag, nil); err != nil {
			return err
		}
	}
	return nil
}
