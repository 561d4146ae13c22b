package collbench

import (
	"fmt"
	"slices"
	"testing"
)

// exchange plays the kernel's Alltoall and Alltoallv between in-process
// ranks: what the coll and MPI sides do over the network.
func exchange(t *testing.T, st []*isState) {
	t.Helper()
	n := len(st)
	for _, s := range st {
		s.bucket()
	}
	for r, s := range st {
		for from := range n {
			s.rcount[from] = st[from].scount[r]
		}
		if err := s.received(); err != nil {
			t.Fatal(err)
		}
		for from := range n {
			f := st[from]
			copy(s.recv[s.rd[from]:s.rd[from]+s.rc[from]], f.send[f.sd[r]:f.sd[r]+f.sc[r]])
		}
	}
}

// verifyAll is verifyIS without the network: the global sums of every
// rank's counts and checksums.
func verifyAll(st []*isState) error {
	var before, after int64
	var sb, sa uint64
	for _, s := range st {
		sum, err := s.verifyLocal()
		if err != nil {
			return err
		}
		before, after = before+int64(s.generated), after+int64(s.sortedKeys)
		sb, sa = sb+s.sumBefore, sa+sum
	}
	return isVerifyGlobal(before, after, sb, sa)
}

func newJob(n, bytes int) []*isState {
	st := make([]*isState, n)
	for r := range st {
		st[r] = newIS(r, n, bytes)
	}
	return st
}

// TestISSorts: after the exchange and the counting sort, the ranks' keys
// in rank order are every generated key, sorted (against slices.Sort of
// all of them), and the check passes.
func TestISSorts(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8} {
		for _, bytes := range []int{8, 4096, 1 << 18} {
			st := newJob(n, bytes)
			var all []uint32
			for _, s := range st {
				all = append(all, s.keys...)
			}
			for range 2 { // a second iteration must give the same
				exchange(t, st)
				for _, s := range st {
					if err := s.sort(); err != nil {
						t.Fatal(err)
					}
				}
			}
			var got []uint32
			for _, s := range st {
				got = append(got, s.sorted[:s.sortedKeys]...)
			}
			slices.Sort(all)
			if !slices.Equal(got, all) {
				t.Fatalf("%d ranks, %d B: the sorted keys differ from the generated ones sorted", n, bytes)
			}
			if err := verifyAll(st); err != nil {
				t.Fatalf("%d ranks, %d B: %v", n, bytes, err)
			}
		}
	}
}

// TestISKeys: a fixed seed gives every rank the same keys on every run,
// and different ranks different keys, spread unevenly over the buckets as
// NAS IS's are.
func TestISKeys(t *testing.T) {
	a, b, c := isKeys(0, 4096), isKeys(0, 4096), isKeys(1, 4096)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Fatal("rank 0's keys differ between calls, or equal rank 1's")
	}
	st := newIS(0, 8, 1<<16)
	st.bucket()
	if lo, hi := slices.Min(st.scount), slices.Max(st.scount); hi < 2*lo {
		t.Fatalf("bucket sizes %v: want the middle ranks' at least twice the end ones'", st.scount)
	}
	for r := range 8 {
		lo, hi := isRange(r, 8)
		if isOwner(lo, 8) != r || isOwner(hi-1, 8) != r || (r < 7 && isOwner(hi, 8) != r+1) {
			t.Fatalf("rank %d's range [%d, %d) disagrees with isOwner", r, lo, hi)
		}
	}
}

// TestISCorruptedKey: a key changed in transit to another key of the same
// rank's range sorts fine, and the checksum catches it; a key moved out
// of the range is refused by the sort, naming rank and key.
func TestISCorruptedKey(t *testing.T) {
	st := newJob(4, 4096)
	exchange(t, st)
	s := st[2]
	s.recv[5] = s.lo + (s.recv[5]-s.lo+1)%(s.hi-s.lo) // the next key of its range
	for _, s := range st {
		if err := s.sort(); err != nil {
			t.Fatal(err)
		}
	}
	var sb, sa uint64
	for _, s := range st {
		sum, _ := s.verifyLocal()
		sb, sa = sb+s.sumBefore, sa+sum
	}
	want := fmt.Sprintf("is: the checksum of the keys is %#x before the exchange and %#x after the sort: a key was changed", sb, sa)
	if err := verifyAll(st); err == nil || err.Error() != want || sa == sb {
		t.Fatalf("%v, want %s", err, want)
	}

	exchange(t, st)
	st[1].recv[0] = st[1].hi
	want = fmt.Sprintf("is: rank 1 received key %d, outside its range [%d, %d)", st[1].hi, st[1].lo, st[1].hi)
	if err := st[1].sort(); err == nil || err.Error() != want {
		t.Fatalf("%v, want %s", err, want)
	}
}

// TestISLostKey: a rank whose sorted keys are one short, or out of order,
// fails the check.
func TestISLostKey(t *testing.T) {
	st := newJob(3, 4096)
	exchange(t, st)
	for _, s := range st {
		if err := s.sort(); err != nil {
			t.Fatal(err)
		}
	}
	st[0].sortedKeys--
	if err := verifyAll(st); err == nil || err.Error() != "is: the ranks generated 3072 keys and hold 3071 after the sort" {
		t.Fatalf("%v", err)
	}
	st[0].sortedKeys++
	s := st[1]
	s.sorted[0], s.sorted[1] = s.hi-1, s.lo
	want := fmt.Sprintf("is: rank 1's sorted keys 0 and 1 are %d and %d, out of order", s.hi-1, s.lo)
	if _, err := s.verifyLocal(); err == nil || err.Error() != want {
		t.Fatalf("%v, want %s", err, want)
	}
}

// TestISReceivedCounts: a peer's count that does not fit the buffer is an
// error naming it, not a slice panic.
func TestISReceivedCounts(t *testing.T) {
	s := newIS(0, 2, 64)
	s.rcount[0], s.rcount[1] = 16, 17
	if err := s.received(); err == nil || err.Error() != "is: rank 1 says it sends 17 keys to rank 0, which has room for 16 more" {
		t.Fatalf("%v", err)
	}
	s.rcount[1] = -1
	if err := s.received(); err == nil || err.Error() != "is: rank 1 says it sends -1 keys to rank 0, which has room for 16 more" {
		t.Fatalf("%v", err)
	}
}
