//go:build ofi && pmix

// Command twonodes is a job of two nodes started by mpirun (or srun): its
// ranks learn their rank, the job's size and their node from PMIx through
// ofinet.Join, share memory with the ranks of their node, and reach the
// others over libfabric, with the same calls. Each rank sends its
// counterpart on the other node a 1 MiB []float64 (by the LMT's net-read
// backend) and its neighbour on its own node a small one, both with
// Sendrecv; rank 0 gathers what each rank saw and prints it in rank order.
//
//	go build -tags "ofi pmix" ./examples/twonodes
//	mpirun -np 4 -x KNEMESIS_NODE_MAP=0,0,1,1 ./twonodes   # two nodes of one machine
//	mpirun -np 4 --host a:2,b:2 ./twonodes -node <this node's address>
package main

import (
	"flag"
	"fmt"
	"hash/crc32"
	"log"
	"unsafe"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/netmod/ofi"
	"github.com/knemesis/knemesis/netmod/ofinet"
)

const blockLen = 1 << 17 // float64s: 1 MiB

func main() {
	provider := flag.String("provider", ofinet.DefaultProvider, "libfabric provider: "+ofinet.ProviderNames())
	node := flag.String("node", "127.0.0.1", "this node's address on the fabric")
	flag.Parse()
	if err := run(*provider, *node); err != nil {
		log.Fatal(err)
	}
}

func run(provider, node string) error {
	ep, c, err := ofinet.Join(ofinet.Config{Config: ofi.Config{Provider: provider, Node: node}}, nil)
	if err != nil {
		return err
	}
	defer c.Finalize()
	defer ep.Close()
	l, err := attach.Attach(ep, attach.Options{}) // the LMT: large messages by rendezvous
	if err != nil {
		return err
	}
	defer l.Close()
	r, n := ep.Rank(), ep.Size()
	if n%2 != 0 {
		return fmt.Errorf("rank %d: a job of %d ranks; want an even number, half on each node", r, n)
	}
	far := (r + n/2) % n // the counterpart on the other node
	near := r ^ 1        // the neighbour on this node
	out, in := block(r), make([]float64, blockLen)
	if _, err := knemesis.Sendrecv(ep, far, 1, out, far, 1, in); err != nil {
		return fmt.Errorf("rank %d with rank %d: %w", r, far, err)
	}
	got := crc(in)
	if want := crc(block(far)); got != want {
		return fmt.Errorf("rank %d: 1 MiB from rank %d arrived with crc32 %08x, sent with %08x", r, far, got, want)
	}
	word := []int64{int64(r)}
	nb := []int64{-1}
	if _, err := knemesis.Sendrecv(ep, near, 2, word, near, 2, nb); err != nil {
		return fmt.Errorf("rank %d with rank %d: %w", r, near, err)
	}
	line := fmt.Sprintf("rank %d of %d on node %d: 1 MiB from rank %d by %s, crc32 %08x (sent %08x); rank %d by %s said %d",
		r, n, c.Node(), far, ep.Path(far), got, crc(block(far)), near, ep.Path(near), nb[0])
	if r != 0 {
		return ep.Send(0, 3, []byte(line))
	}
	fmt.Println(line)
	buf := make([]byte, 512)
	for src := 1; src < n; src++ {
		st, err := ep.Recv(src, 3, buf)
		if err != nil {
			return err
		}
		fmt.Println(string(buf[:st.Count]))
	}
	return nil
}

func block(r int) []float64 {
	b := make([]float64, blockLen)
	for i := range b {
		b[i] = float64(i*(r+1)) / 8
	}
	return b
}

func crc(s []float64) uint32 {
	return crc32.ChecksumIEEE(unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s)))
}
