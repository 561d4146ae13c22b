package knemesis_test

import (
	"log"
	"os"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// Each rank joins with the automatic choice; Send and Recv then move
// messages of any size, large ones by the backend chosen for the pair.
func ExampleJoin() {
	p, ok := launch.Self()
	if !ok {
		return // not started by launch.Run
	}
	ep, err := knemesis.JoinProc(p, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ep.Close()
	big := make([]byte, 8<<20)
	if p.Rank != 0 {
		if _, err := ep.Recv(0, 0, big); err != nil {
			log.Fatal(err)
		}
		return
	}
	_ = ep.Selection.Describe(os.Stderr) // what was chosen, and why
	var r nemesis.Request
	if err := ep.Isend(&r, 1, 0, big); err != nil {
		log.Fatal(err)
	}
	if err := ep.Wait(&r); err != nil {
		log.Fatal(err)
	}
	st, _ := attach.Stats(&r)
	log.Printf("%d bytes via %s", st.Bytes, st.Backend)
}
