package attach_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	_ "github.com/knemesis/knemesis/vmsplice" // registers the vmsplice backend
)

// Each rank of a job joins the endpoint and attaches the LMT; from then on
// Send and Recv move large messages through it without further ado. Run
// outside a job, the example starts itself as a job of two ranks; each
// rank, and then the launcher, says what moved.
func Example() {
	p, ok := launch.Self()
	if !ok {
		var out bytes.Buffer // the ranks' lines: the launcher prints its own
		err := launch.Run(context.Background(), launch.Options{Procs: 2, Args: []string{"-test.run=^Example$"},
			Timeout: time.Minute, Stdout: &out, Stderr: os.Stderr})
		if err != nil {
			fmt.Printf("%v\n%s", err, out.String())
			return
		}
		fmt.Println("16 MiB moved by the default backend, 16 MiB by vmsplice")
		return
	}
	if err := exampleRank(p); err != nil {
		fmt.Printf("rank %d: %v\n", p.Rank, err)
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
