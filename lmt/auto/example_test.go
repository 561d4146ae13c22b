package auto_test

import (
	"log"
	"os"

	"github.com/knemesis/knemesis/lmt/attach"
	"github.com/knemesis/knemesis/lmt/auto"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// Each rank joins the endpoint and lets auto choose: from then on Send and
// Recv keep small messages on the cells and move large ones by the backend
// the pair's table, corrected by measurement, says.
func ExampleAttach() {
	p, ok := launch.Self()
	if !ok {
		return // not started by launch.Run
	}
	ep, err := nemesis.JoinProc(p, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	sel, err := auto.Attach(ep, auto.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sel.Close()
	for _, w := range sel.Warnings() {
		log.Printf("rank %d: %s", p.Rank, w) // a tuning file from another machine, say
	}
	if p.Rank == 0 {
		// What was chosen, for which pair, and why.
		if err := sel.Describe(os.Stderr); err != nil {
			log.Fatal(err)
		}
	}

	big := make([]byte, 8<<20)
	if p.Rank == 0 {
		var r nemesis.Request
		if err := ep.Isend(&r, 1, 0, big); err != nil {
			log.Fatal(err)
		}
		if err := sel.Wait(&r); err != nil {
			log.Fatal(err)
		}
		st, _ := attach.Stats(&r)
		log.Printf("%d bytes via %s (eager up to %d bytes)", st.Bytes, st.Backend, sel.EagerMax())
		return
	}
	if _, err := ep.Recv(0, 0, big); err != nil {
		log.Fatal(err)
	}
}
