package attach_test

import (
	"log"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	_ "github.com/knemesis/knemesis/vmsplice" // registers the vmsplice backend
)

// Each rank of a job joins the endpoint and attaches the LMT; from then on
// Send and Recv move large messages through it without further ado.
func Example() {
	p, ok := launch.Self()
	if !ok {
		return // not started by launch.Run
	}
	ep, err := nemesis.JoinProc(p, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	l, err := attach.Attach(ep, attach.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	big := make([]byte, 64<<20)
	if p.Rank == 0 {
		// Default backend order (shm first), then one message forced
		// through vmsplice.
		if err := ep.Send(1, 0, big); err != nil {
			log.Fatal(err)
		}
		var r nemesis.Request
		if err := l.Isend(&r, 1, 1, big, "vmsplice"); err != nil {
			log.Fatal(err)
		}
		if err := ep.Wait(&r); err != nil {
			log.Fatal(err)
		}
		st, _ := attach.Stats(&r)
		log.Printf("%d bytes via %s in %d chunks, %d system calls", st.Bytes, st.Backend, st.Chunks, st.Syscalls)
		return
	}
	for tag := 0; tag < 2; tag++ {
		if _, err := ep.Recv(0, tag, big); err != nil {
			log.Fatal(err)
		}
	}
}
