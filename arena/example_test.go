package arena_test

import (
	"bytes"
	"fmt"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// A rank sends from a buffer of the job's shared arena, through the LMT's
// arena backend (named in the preference: otherwise the endpoint's own
// single copy carries arena buffers, with no rendezvous): the receiver
// copies it once, straight out of that buffer, with no system call. (Each
// rank is a goroutine here; real jobs run one process per rank.)
func Example() {
	job := launch.NewJobName()
	opts := &nemesis.Options{ArenaSize: 1 << 20}
	done := make(chan error)
	go func() { // rank 1 sends from its arena
		ep, err := nemesis.Join(job, 1, 2, opts)
		if err != nil {
			done <- err
			return
		}
		defer ep.Close()
		l, err := attach.Attach(ep, attach.Options{Prefer: []string{lmt.Arena}})
		if err != nil {
			done <- err
			return
		}
		defer l.Close()
		buf, err := ep.Alloc(64 << 10) // as MPI_Alloc_mem
		if err == nil {
			copy(buf, bytes.Repeat([]byte("arena!"), len(buf)/6))
			err = ep.Send(0, 0, buf)
		}
		if err == nil {
			err = ep.Free(buf)
		}
		done <- err
	}()

	ep, err := nemesis.Join(job, 0, 2, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	l, err := attach.Attach(ep, attach.Options{Prefer: []string{lmt.Arena}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	in := make([]byte, 64<<10)
	var r nemesis.Request
	if err := ep.Irecv(&r, 1, 0, in); err != nil {
		fmt.Println(err)
		return
	}
	if err := ep.Wait(&r); err != nil {
		fmt.Println(err)
		return
	}
	st, _ := attach.Stats(&r)
	fmt.Printf("%d bytes by %s, %d system calls: %q...\n", r.Status().Count, st.Backend, st.Syscalls, in[:12])
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	// Output: 65536 bytes by arena, 0 system calls: "arena!arena!"...
}
