package nemesis_test

import (
	"bytes"
	"fmt"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// A message sent from the job's shared arena (as from MPI_Alloc_mem) is
// copied once, by its receiver, straight out of the sender's buffer: the
// sender's request completes when the receiver has copied it. (Each rank
// is a goroutine here; real jobs run one process per rank.)
func ExampleEndpoint_Alloc() {
	job := launch.NewJobName()
	opts := &nemesis.Options{ArenaSize: 1 << 20}
	done := make(chan error)
	go func() { // rank 1 receives into an ordinary buffer
		ep, err := nemesis.Join(job, 1, 2, opts)
		if err != nil {
			done <- err
			return
		}
		defer ep.Close()
		in := make([]byte, 16<<10)
		st, err := ep.Recv(0, 3, in)
		if err == nil {
			s := ep.Stats()
			fmt.Printf("received %d bytes %q..., %d copied out of the sender's arena\n", st.Count, in[:12], s.ArenaBytes)
		}
		done <- err
	}()

	ep, err := nemesis.Join(job, 0, 2, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	buf, err := ep.Alloc(16 << 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	copy(buf, bytes.Repeat([]byte("arena!"), len(buf)/6))
	if err := ep.Send(1, 3, buf); err != nil { // returns once rank 1 has copied it
		fmt.Println(err)
		return
	}
	fmt.Println(<-done, ep.Free(buf))
	// Output:
	// received 16384 bytes "arena!arena!"..., 16384 copied out of the sender's arena
	// <nil> <nil>
}
