package knemesis_test

import (
	"fmt"
	"hash/crc32"
	"os"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// Each rank joins with the automatic choice; Send and Recv then move
// messages of any size, large ones by the backend chosen for the pair. A
// program starts its ranks with launch.Run; here launchtest.RunExample
// starts this example as a job of two ranks and checks that each ran
// joinRank to its end.
func ExampleJoin() {
	if err := launchtest.RunExample("ExampleJoin", 2, joinRank); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("8 MiB sent and received intact")
	// Output: 8 MiB sent and received intact
}

func joinRank(p launch.Proc) error {
	ep, err := knemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i % 251)
	}
	want := crc32.ChecksumIEEE(big)
	if p.Rank != 0 {
		clear(big)
		if _, err := ep.Recv(0, 0, big); err != nil {
			return err
		}
		if got := crc32.ChecksumIEEE(big); got != want {
			return fmt.Errorf("received 8 MiB with CRC %#x, sent with %#x", got, want)
		}
		return nil
	}
	_ = ep.Selection.Describe(os.Stderr) // what was chosen, and why
	var r nemesis.Request
	if err := ep.Isend(&r, 1, 0, big); err != nil {
		return err
	}
	if err := ep.Wait(&r); err != nil {
		return err
	}
	// The backend depends on the machine; the bytes it moved do not.
	st, _ := attach.Stats(&r)
	fmt.Fprintf(os.Stderr, "%d bytes via %s\n", st.Bytes, st.Backend)
	if st.Bytes != int64(len(big)) || st.Backend == "" {
		return fmt.Errorf("%d bytes via %q, want %d via some backend", st.Bytes, st.Backend, len(big))
	}
	return nil
}

// A program of two processes of one binary, as README.md shows it: the
// parent starts them with launch.Run, rank 0 sends 8 MiB, rank 1 receives
// them. Here launchtest.RunExample stands in for launch.Run and checks
// that both ranks ran rank to its end.
func Example_parentAndChild() {
	if err := launchtest.RunExample("Example_parentAndChild", 2, rank); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("rank 1 received 8 MiB intact")
	// Output: rank 1 received 8 MiB intact
}

// rank is what each child runs.
func rank(p launch.Proc) error {
	ep, err := knemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	buf := make([]byte, 8<<20)
	if p.Rank == 0 {
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		return ep.Send(1, 0, buf) // any size: eager, or the LMT's choice
	}
	st, err := ep.Recv(0, 0, buf)
	if err != nil {
		return err
	}
	sum := crc32.ChecksumIEEE(buf[:st.Count])
	if st.Count != 8<<20 || sum != 0x4db8402c {
		return fmt.Errorf("received %d bytes with crc32 %08x, want 8388608 with 4db8402c", st.Count, sum)
	}
	return nil
}
