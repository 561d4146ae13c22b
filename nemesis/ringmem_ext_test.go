//go:build ringmem

// The shm LMT's memory in an all-to-all, measured (not built by default:
// it reaches into package attach, which nemesis's own tests do not need).
//
//	go test -tags ringmem -run TestShmRingMemory -v ./nemesis/
package nemesis_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestShmRingMemory: every rank of an 8-rank job sends every other rank
// eight 64 KiB messages through the shm LMT (enough to cycle every slot of
// a 16 × 32 KiB ring), then sums the resident memory of the rings it
// writes, read from /proc/self/smaps. Rank 0 prints the job's total and
// the figure per ordered pair.
func TestShmRingMemory(t *testing.T) {
	const procs, rounds, size = 8, 8, 64 << 10
	launchtest.Run(t, procs, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		l, err := attach.Attach(ep, attach.Options{EagerMax: 16 << 10, Prefer: []string{"shm"}})
		if err != nil {
			return err
		}
		defer l.Close()
		out, in := make([]byte, size), make([]byte, size)
		for k := 1; k < procs; k++ {
			dst, src := (p.Rank+k)%procs, (p.Rank-k+procs)%procs
			for range rounds {
				var r nemesis.Request
				if err := ep.Isend(&r, dst, 1, out); err != nil {
					return err
				}
				if _, err := ep.Recv(src, 1, in); err != nil {
					return err
				}
				if err := ep.Wait(&r); err != nil {
					return err
				}
			}
		}
		mine, rings, err := ringRss(fmt.Sprintf("-lmt-%d-", p.Rank))
		if err != nil {
			return err
		}
		var b [16]byte
		if p.Rank != 0 {
			binary.LittleEndian.PutUint64(b[:], mine)
			binary.LittleEndian.PutUint64(b[8:], rings)
			return ep.Send(0, 2, b[:])
		}
		total, n := mine, rings
		for range procs - 1 {
			if _, err := ep.Recv(nemesis.AnySource, 2, b[:]); err != nil {
				return err
			}
			total += binary.LittleEndian.Uint64(b[:])
			n += binary.LittleEndian.Uint64(b[8:])
		}
		fmt.Printf("shm rings: %d rings resident %d bytes (%.1f KiB per ordered pair); at that rate an all-to-all maps %.2f GiB at 128 ranks, %.2f GiB at 192\n",
			n, total, float64(total)/float64(n)/1024,
			float64(total)/float64(n)*128*127/(1<<30), float64(total)/float64(n)*192*191/(1<<30))
		return nil
	})
}

// ringRss sums the Rss of this process's mappings whose name contains
// marker, and counts them.
func ringRss(marker string) (uint64, uint64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var sum, n uint64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 6 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = strings.Contains(line, marker)
			if in {
				n++
			}
		case in && len(fields) == 3 && fields[0] == "Rss:":
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			sum += kb << 10
		}
	}
	return sum, n, sc.Err()
}
