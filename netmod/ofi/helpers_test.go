//go:build ofi

package ofi

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The provider and address every test uses: TCP on the loopback only.
const (
	testProvider = "tcp;ofi_rxm"
	testNode     = "127.0.0.1"
	testHdr      = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func open(t testing.TB, peerTimeout time.Duration) *Endpoint {
	t.Helper()
	e, err := Open(Config{Provider: testProvider, Node: testNode, HeaderSize: testHdr, PeerTimeout: peerTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// pair opens two endpoints of testProvider in this process, each knowing
// the other as Addr 0.
func pair(t testing.TB) (a, b *Endpoint) { return openPair(t, testProvider) }

// openPair opens two endpoints of prov, each knowing the other as Addr 0.
func openPair(t testing.TB, prov string) (a, b *Endpoint) {
	t.Helper()
	var eps [2]*Endpoint
	for i := range eps {
		e, err := Open(Config{Provider: prov, Node: testNode, HeaderSize: testHdr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		eps[i] = e
	}
	if _, err := eps[0].Insert(eps[1].Name(), "endpoint b"); err != nil {
		t.Fatal(err)
	}
	if _, err := eps[1].Insert(eps[0].Name(), "endpoint a"); err != nil {
		t.Fatal(err)
	}
	return eps[0], eps[1]
}

// waitAll polls every endpoint until every request is done; both sides of
// a transfer in one process need each other's progress. It fails when a
// whole stall interval passes with no completion on any endpoint, however
// long the wait as a whole. It allocates nothing (TestNoAllocation counts
// through it).
func waitAll(t testing.TB, eps []*Endpoint, reqs ...*Request) {
	t.Helper()
	const stall = time.Minute
	moved := time.Now()
	for {
		done := true
		for _, r := range reqs {
			done = done && r.Done()
		}
		if done {
			return
		}
		for _, e := range eps {
			n, err := e.Poll()
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				moved = time.Now()
			}
		}
		if time.Since(moved) > stall {
			t.Fatalf("waiting for %d requests: nothing completed on any endpoint for %v", len(reqs), stall)
		}
	}
}

// fill writes a pattern that differs per message and per position.
func fill(b []byte, seed uint64) {
	x := seed*0x9e3779b97f4a7c15 + 1
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	for ; i < len(b); i++ {
		b[i] = byte(x >> (8 * (i & 7)))
	}
}

func header(size int, sum uint32) []byte {
	h := make([]byte, testHdr)
	binary.LittleEndian.PutUint64(h, uint64(size))
	binary.LittleEndian.PutUint32(h[8:], sum)
	return h
}

func parseHeader(h []byte) (int, uint32) {
	return int(binary.LittleEndian.Uint64(h)), binary.LittleEndian.Uint32(h[8:])
}

// split cuts b into three entries of unequal length (some empty when b is
// short), so that every transfer goes through the iovec path.
func split(b []byte) [][]byte {
	a, c := len(b)/3, len(b)/2
	return [][]byte{b[:a], b[a:c], b[c:]}
}

var sizes = []int{0, 1, 7, 64, 65, 4096, 65536, 1 << 20, 4<<20 + 3, 64 << 20}

// child is the other process of a two-process test: the test binary run
// again, one test selected, talking to its parent through two pipes.
type child struct {
	cmd *exec.Cmd
	in  *bufio.Reader // lines from the child
	out *os.File      // lines to the child
}

const envChild = "KNEMESIS_OFI_CHILD"

// inChild reports whether this process is the child of test name.
func inChild(name string) bool { return os.Getenv(envChild) == name }

// startChild starts the child of the running test, behind the command
// prefix when one is given (such as ip netns exec), with env added.
func startChild(t *testing.T, prefix []string, env ...string) *child {
	t.Helper()
	up, childUp, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	childDown, down, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append(prefix, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), envChild+"="+t.Name()), env...)
	cmd.ExtraFiles = []*os.File{childUp, childDown}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	childUp.Close()
	childDown.Close()
	c := &child{cmd: cmd, in: bufio.NewReader(up), out: down}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		up.Close()
		down.Close()
	})
	return c
}

// envNode gives a child the address to bind, where it is not testNode.
const envNode = "KNEMESIS_OFI_NODE"

func childNode() string {
	if n := os.Getenv(envNode); n != "" {
		return n
	}
	return testNode
}

// parentLink is the child's end of the two pipes.
func parentLink() (*bufio.Reader, *os.File) {
	return bufio.NewReader(os.NewFile(4, "from-parent")), os.NewFile(3, "to-parent")
}

func sendLine(f *os.File, format string, args ...any) error {
	_, err := fmt.Fprintf(f, format+"\n", args...)
	return err
}

func readLine(r *bufio.Reader) (string, error) {
	s, err := r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// exchange publishes e's address over the pipes and inserts the other
// side's, labelled label.
func exchange(e *Endpoint, in *bufio.Reader, out *os.File, label string) (Addr, error) {
	if err := sendLine(out, "%s", hex.EncodeToString(e.Name())); err != nil {
		return 0, err
	}
	line, err := readLine(in)
	if err != nil {
		return 0, fmt.Errorf("reading the peer's address: %w", err)
	}
	name, err := hex.DecodeString(line)
	if err != nil {
		return 0, fmt.Errorf("peer's address %q: %w", line, err)
	}
	return e.Insert(name, label)
}
