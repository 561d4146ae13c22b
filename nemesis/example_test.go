package nemesis_test

import (
	"fmt"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// Two ranks of one job exchange a message. Real jobs run one rank per
// process (see launch and launchtest); here each rank is a goroutine, which
// maps the segment just as a process would.
func Example() {
	job := launch.NewJobName()
	done := make(chan error)
	go func() { // rank 1: echo one message back, upper-cased
		ep, err := nemesis.Join(job, 1, 2, nil)
		if err != nil {
			done <- err
			return
		}
		defer ep.Close()
		buf := make([]byte, 64)
		st, err := ep.Recv(nemesis.AnySource, nemesis.AnyTag, buf)
		if err == nil {
			for i := range buf[:st.Count] {
				buf[i] -= 'a' - 'A'
			}
			err = ep.Send(st.Source, st.Tag, buf[:st.Count])
		}
		done <- err
	}()

	ep, err := nemesis.Join(job, 0, 2, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	var send nemesis.Request // caller-owned: starting a transfer allocates nothing
	if err := ep.Isend(&send, 1, 7, []byte("hello")); err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, 64)
	st, err := ep.Recv(1, 7, buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ep.Wait(&send), <-done)
	fmt.Printf("rank %d, tag %d: %s\n", st.Source, st.Tag, buf[:st.Count])
	// Output:
	// <nil> <nil>
	// rank 1, tag 7: HELLO
}

// A message goes out from several buffers and comes in to several others,
// with no packing on either side: here a fixed header and a body, sent as
// one message and split again on receipt where the receiver chose. The
// lists may differ on the two sides; zero-length entries are skipped.
func ExampleEndpoint_Sendv() {
	job := launch.NewJobName()
	done := make(chan error)
	go func() { // rank 1
		ep, err := nemesis.Join(job, 1, 2, nil)
		if err != nil {
			done <- err
			return
		}
		defer ep.Close()
		hdr, body := make([]byte, 4), make([]byte, 64)
		st, err := ep.Recvv(0, 3, [][]byte{hdr, nil, body})
		if err == nil {
			fmt.Printf("header %q, body %q (%d bytes)\n", hdr, body[:st.Count-len(hdr)], st.Count)
		}
		done <- err
	}()

	ep, err := nemesis.Join(job, 0, 2, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	hdr := []byte("MSG1")
	words := [][]byte{[]byte("scattered "), []byte("payload, "), []byte("gathered")}
	err = ep.Sendv(1, 3, [][]byte{hdr, words[0], {}, words[1], words[2]})
	fmt.Println(err, <-done)
	// Output:
	// header "MSG1", body "scattered payload, gathered" (31 bytes)
	// <nil> <nil>
}
