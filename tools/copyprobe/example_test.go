package copyprobe_test

import (
	"fmt"
	"io"
	"log"
	"os"

	"github.com/knemesis/knemesis/tools/copyprobe"
)

// Counting the copies of a pipe transfer made by this very process. A
// launcher would call TrackChildren(os.Getpid()) before starting its ranks
// instead.
func ExampleOpen() {
	p, err := copyprobe.Open(copyprobe.Options{})
	if err != nil {
		log.Fatal(err) // not root, no BPF, no tracefs
	}
	defer p.Close()
	if err := p.Track(os.Getpid()); err != nil {
		log.Fatal(err)
	}

	const n = 1 << 20
	r, w, _ := os.Pipe()
	go func() {
		w.Write(make([]byte, n)) // one copy into the pipe
		w.Close()
	}()
	io.Copy(io.Discard, r) // one copy out

	rep, err := p.Read()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(rep) // the bytes per copier, and how each was counted
	fmt.Println(rep.CopiesPerByte(n))
}
