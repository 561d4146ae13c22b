package attach_test

import (
	"fmt"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	_ "github.com/knemesis/knemesis/vmsplice" // registers the vmsplice backend
)

// Each rank of a job joins the endpoint and attaches the LMT; from then on
// Send and Recv move large messages through it without further ado. A
// program starts its ranks with launch.Run; here launchtest.RunExample
// starts this example as a job of two ranks and checks that each ran
// exampleRank to its end.
func Example() {
	if err := launchtest.RunExample("Example", 2, exampleRank); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("16 MiB moved by the default backend, 16 MiB by vmsplice")
	// Output: 16 MiB moved by the default backend, 16 MiB by vmsplice
}

func exampleRank(p launch.Proc) error {
	ep, err := nemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	l, err := attach.Attach(ep, attach.Options{})
	if err != nil {
		return err
	}
	defer l.Close()

	big := make([]byte, 16<<20)
	if p.Rank == 0 {
		for i := range big {
			big[i] = byte(i % 251)
		}
		// Default backend order (shm first), then one message forced
		// through vmsplice.
		if err := ep.Send(1, 0, big); err != nil {
			return err
		}
		var r nemesis.Request
		if err := l.Isend(&r, 1, 1, big, "vmsplice"); err != nil {
			return err
		}
		if err := ep.Wait(&r); err != nil {
			return err
		}
		if st, _ := attach.Stats(&r); st.Backend != "vmsplice" || st.Bytes != int64(len(big)) {
			return fmt.Errorf("%d bytes via %s, want %d via vmsplice", st.Bytes, st.Backend, len(big))
		}
		return nil
	}
	for tag := 0; tag < 2; tag++ {
		clear(big)
		if _, err := ep.Recv(0, tag, big); err != nil {
			return err
		}
		for i, b := range big {
			if b != byte(i%251) {
				return fmt.Errorf("message %d: byte %d is %d, want %d", tag, i, b, byte(i%251))
			}
		}
	}
	return nil
}
