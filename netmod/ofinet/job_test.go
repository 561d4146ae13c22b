//go:build ofi

package ofinet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/netmod/internal/netnstest"
	"github.com/knemesis/knemesis/netmod/ofi"
)

// The children of these tests are this test binary, told what to do by
// the environment.
const (
	envRank     = "KNEMESIS_OFINET_RANK"
	envScenario = "KNEMESIS_OFINET_SCENARIO"
	envJob      = "KNEMESIS_OFINET_JOB"
	envNode     = "KNEMESIS_OFINET_NODE"
	provider    = "tcp;ofi_rxm"
	jobSize     = 4
)

var nodeOf = []int{0, 0, 1, 1}

func TestMain(m *testing.M) {
	if os.Getenv(envRank) != "" {
		os.Exit(netnsChild())
	}
	os.Exit(m.Run())
}

// scenarios run in every rank of a job of four, two per node, each with
// the default LMT attached (withLMT).
var scenarios = map[string]func(ep *nemesis.Endpoint) error{
	"traffic": traffic,
	"kill":    killRemote,
}

// withLMT runs scenario fn with the default LMT attached to ep, as a job
// runs: long messages go through its rendezvous, within the node by the
// node's backends, across by net-read.
func withLMT(ep *nemesis.Endpoint, fn func(*nemesis.Endpoint) error) error {
	l, err := attach.Attach(ep, attach.Options{})
	if err != nil {
		return err
	}
	err = fn(ep)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	return err
}

func TestTraffic(t *testing.T) { runNetns(t, "traffic") }

// TestRemoteKilled: rank 3 dies by SIGKILL while it sends 64 MiB to rank
// 0. Rank 0 (other node) and rank 2 (its node) fail their receives from it
// with a PeerError naming rank 3, rank 1's wildcard receive too; no one
// hangs (the test's deadline).
func TestRemoteKilled(t *testing.T) { runNetns(t, "kill") }

// TestCannotStart: a provider that does not exist fails Open with the
// provider's name and what fi_getinfo said.
func TestCannotStart(t *testing.T) {
	_, err := Open(Config{Config: ofi.Config{Provider: "nosuch", Node: "127.0.0.1"}})
	var se *ofi.StartError
	if !errors.As(err, &se) || se.Provider != "nosuch" || se.Call != "fi_getinfo" || !errors.Is(err, ofi.ErrNoProvider) ||
		!strings.Contains(err.Error(), `provider "nosuch"`) || !strings.Contains(err.Error(), "tcp;ofi_rxm") {
		t.Fatalf("Open of provider nosuch: %v; want an ofi.StartError naming it, fi_getinfo and the providers offered", err)
	}
}

// runNetns runs scenario in four children, two in each of two network
// namespaces, and checks how each ended.
func runNetns(t *testing.T, scenario string) {
	if os.Geteuid() != 0 {
		t.Skip("lacks root: creating network namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("lacks iproute2: ip (Debian package iproute2) is not installed: cannot create network namespaces")
	}
	nodes := netnstest.TwoNodes(t, "net")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	job := launch.NewJobName()
	key, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	kids := make([]*kid, jobSize)
	for r := range kids {
		n := nodes[nodeOf[r]]
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.NS, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRank+"="+strconv.Itoa(r), envScenario+"="+scenario, envJob+"="+job, envNode+"="+n.Addr,
			jobkey.Env+"="+key.Encode())
		k, err := start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		kids[r] = k
	}
	// The address exchange: one line from each, all four to each.
	addrs := make([]string, jobSize)
	for r, k := range kids {
		line, err := k.out.ReadString('\n')
		if err != nil {
			t.Fatalf("rank %d's address: %v\n%s", r, err, k.stderr.String())
		}
		addrs[r] = strings.TrimSpace(line)
	}
	for _, k := range kids {
		fmt.Fprintln(k.in, strings.Join(addrs, " "))
	}
	for r, k := range kids {
		err := k.cmd.Wait()
		log := k.stderr.String()
		t.Logf("rank %d: %s", r, log)
		if ctx.Err() != nil {
			t.Fatalf("rank %d still running after the deadline: a hang", r)
		}
		if scenario == "kill" && r == 3 {
			if ws, ok := k.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Errorf("rank 3 ended with %v, want killed by SIGKILL", err)
			}
			continue
		}
		if err != nil || !strings.Contains(log, "scenario ok") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if _, err := os.Stat("/dev/shm/knemesis-" + job + ".node0"); !os.IsNotExist(err) {
		t.Errorf("node 0's segment is left in /dev/shm: %v", err)
	}
}

type kid struct {
	cmd    *exec.Cmd
	in     *os.File
	out    *bufio.Reader
	stderr *bytes.Buffer
}

func start(cmd *exec.Cmd) (*kid, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	k := &kid{cmd: cmd, out: bufio.NewReader(out), stderr: new(bytes.Buffer)}
	cmd.Stderr = k.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k.in = in.(*os.File)
	return k, nil
}

// netnsChild is one rank: it joins through the module bound to its
// namespace's address, the addresses relayed by the parent, and runs its
// scenario.
func netnsChild() int {
	rank, _ := strconv.Atoi(os.Getenv(envRank))
	fn := scenarios[os.Getenv(envScenario)]
	m, err := Open(Config{Config: ofi.Config{Provider: provider, Node: os.Getenv(envNode)}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	in := bufio.NewReader(os.Stdin)
	exchange := func(addr []byte) ([][]byte, error) {
		fmt.Println(hex.EncodeToString(addr))
		line, err := in.ReadString('\n')
		if err != nil {
			return nil, err
		}
		var addrs [][]byte
		for _, f := range strings.Fields(line) {
			a, err := hex.DecodeString(f)
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, a)
		}
		return addrs, nil
	}
	prepare(rank)
	ep, err := nemesis.Join(os.Getenv(envJob), rank, jobSize, &nemesis.Options{Net: &nemesis.Net{Module: m, Nodes: nodeOf, Exchange: exchange, PeerTimeout: 3 * time.Second}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ep.Close()
	if err := withLMT(ep, fn); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "rank %d: scenario ok\n", rank)
	return 0
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

var bigSizes = []int{0, 1, 8, DefaultPacket - 1, DefaultPacket, DefaultPacket + 1, 1<<20 + 3, 64 << 20}

// The big messages and their checksums, made before Join: generating 64
// MiB of pattern takes a fraction of a second of CPU, many seconds on a
// machine whose two CPUs a hundred processes share, and a rank that
// computes between two calls answers no liveness probe meanwhile: its
// peers, blocked on it, would take it for lost (Net.PeerTimeout).
var (
	bigMsgs  [][]byte // bigMsgs[i] = pattern(bigSizes[i], i)
	bigSums  []uint32 // their CRC-32s
	killMsg  []byte   // killRemote's message, pattern(killSize, 1)
	killSize = 64 << 20
)

// prepare makes what the rank's scenario sends and checks.
func prepare(rank int) {
	for i, n := range bigSizes {
		msg := pattern(n, i)
		bigSums = append(bigSums, crc32.ChecksumIEEE(msg))
		if rank == 1 || rank == 3 {
			bigMsgs = append(bigMsgs, msg)
		}
	}
	if rank == 3 {
		killMsg = pattern(killSize, 1)
	}
}

// traffic: ranks 1, 2 and 3 send to rank 0, which receives from AnySource
// (so from both paths) and checks each sender's order and checksums; then
// ranks 3 and 1 send 0 B to 64 MiB across the nodes (to ranks 0 and 2), by
// Isendv and Isend, checked by checksum, the long ones through the LMT's
// net-read backend; a barrier ends it.
func traffic(ep *nemesis.Endpoint) error {
	const perSender = 300
	me := ep.Rank()
	if me != 0 {
		for i := range perSender {
			if err := ep.Send(0, 7, pattern(i*131%20000, me*10000+i)); err != nil {
				return fmt.Errorf("send %d to rank 0: %w", i, err)
			}
		}
	} else {
		next := make([]int, jobSize)
		buf := make([]byte, 20000)
		for range 3 * perSender {
			st, err := ep.Recv(nemesis.AnySource, 7, buf)
			if err != nil {
				return err
			}
			i := next[st.Source]
			next[st.Source]++
			want := pattern(i*131%20000, st.Source*10000+i)
			if st.Tag != 7 || !bytes.Equal(buf[:st.Len], want) {
				return fmt.Errorf("message %d from rank %d (path %s): tag %d, %d bytes; out of order or damaged", i, st.Source, ep.Path(st.Source), st.Tag, st.Len)
			}
		}
	}
	if err := bigOnes(ep); err != nil {
		return err
	}
	return barrier(ep)
}

func bigOnes(ep *nemesis.Endpoint) error {
	peer := map[int]int{3: 0, 1: 2, 0: 3, 2: 1}[ep.Rank()]
	if ep.Path(peer) != "net ofi tcp;ofi_rxm" {
		return fmt.Errorf("rank %d reaches rank %d by %q, want the network", ep.Rank(), peer, ep.Path(peer))
	}
	sender := ep.Rank() == 3 || ep.Rank() == 1
	exposed := 0 // segments of messages past the eager limit: one region each
	for i, n := range bigSizes {
		if sender {
			// From a list of two segments, then from one buffer: in
			// packets up to the eager limit, by the LMT's net-read
			// (fi_read of each segment) past it.
			msg := bigMsgs[i]
			if err := sendVia(ep, peer, 100+i, [][]byte{msg[:n/2], nil, msg[n/2:]}); err != nil {
				return fmt.Errorf("%d bytes to rank %d: %w", n, peer, err)
			}
			if err := sendVia(ep, peer, 200+i, [][]byte{msg}); err != nil {
				return fmt.Errorf("%d bytes to rank %d from one buffer: %w", n, peer, err)
			}
			if n > attach.DefaultEagerMax {
				exposed += 3
			}
			continue
		}
		for _, tag := range []int{100 + i, 200 + i} {
			buf := make([]byte, n+1)
			iov := [][]byte{buf[:n/3], buf[n/3:]}
			st, err := ep.Recvv(peer, tag, iov)
			if err != nil {
				return err
			}
			if st.Len != n || crc32.ChecksumIEEE(buf[:n]) != bigSums[i] {
				return fmt.Errorf("%d bytes from rank %d (tag %d): got %d, checksum %s", n, peer, tag, st.Len, "differs")
			}
		}
	}
	m, _ := ep.NetModule().(*Module)
	if m == nil {
		return fmt.Errorf("rank %d's network module is %T, want *ofinet.Module", ep.Rank(), ep.NetModule())
	}
	if got := m.Exposures(); sender && got != uint64(exposed) {
		return fmt.Errorf("rank %d exposed %d buffers for reads, want %d (the segments of its messages past %d bytes)", ep.Rank(), got, exposed, attach.DefaultEagerMax)
	}
	return nil
}

// sendVia sends iov to rank dst and checks the path it took: the LMT's
// net-read past the eager limit, packets up to it.
func sendVia(ep *nemesis.Endpoint, dst, tag int, iov [][]byte) error {
	var r nemesis.Request
	if err := ep.Isendv(&r, dst, tag, iov); err != nil {
		return err
	}
	if err := ep.Wait(&r); err != nil {
		return err
	}
	want := ""
	if r.Len() > attach.DefaultEagerMax {
		want = lmt.NetRead
	}
	st, _ := attach.Stats(&r)
	if st.Backend != want {
		return fmt.Errorf("%d bytes went by backend %q, want %q", r.Len(), st.Backend, want)
	}
	return nil
}

// barrier: everyone reports to rank 0, which answers everyone.
func barrier(ep *nemesis.Endpoint) error {
	const tag = 999
	if ep.Rank() != 0 {
		if err := ep.Send(0, tag, nil); err != nil {
			return err
		}
		_, err := ep.Recv(0, tag, nil)
		return err
	}
	for range jobSize - 1 {
		if _, err := ep.Recv(nemesis.AnySource, tag, nil); err != nil {
			return err
		}
	}
	for r := 1; r < jobSize; r++ {
		if err := ep.Send(r, tag, nil); err != nil {
			return err
		}
	}
	return nil
}

// killRemote: see TestRemoteKilled.
func killRemote(ep *nemesis.Endpoint) error {
	size := killSize
	if err := barrier(ep); err != nil {
		return err
	}
	var pe *nemesis.PeerError
	buf := make([]byte, size)
	switch ep.Rank() {
	case 3:
		var r nemesis.Request
		if err := ep.Isend(&r, 0, 1, killMsg); err != nil {
			return err
		}
		for range 2000 {
			if err := ep.Poll(); err != nil {
				return err
			}
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case 0:
		_, err := ep.Recv(3, 1, buf)
		if !errors.As(err, &pe) || pe.Rank != 3 || !errors.Is(err, nemesis.ErrPeerDead) {
			return fmt.Errorf("receive of 64 MiB from the killed rank 3: %v, want a PeerError naming rank 3", err)
		}
		fmt.Fprintf(os.Stderr, "rank 0 (other node): %v\n", err)
	case 2:
		_, err := ep.Recv(3, 2, buf)
		if !errors.As(err, &pe) || pe.Rank != 3 {
			return fmt.Errorf("receive from the killed rank 3 on this node: %v, want a PeerError naming rank 3", err)
		}
		fmt.Fprintf(os.Stderr, "rank 2 (same node): %v\n", err)
	case 1:
		_, err := ep.Recv(nemesis.AnySource, 2, buf)
		if !errors.As(err, &pe) || pe.Rank != 3 {
			return fmt.Errorf("wildcard receive after rank 3 was killed: %v, want a PeerError naming rank 3", err)
		}
		fmt.Fprintf(os.Stderr, "rank 1 (wildcard): %v\n", err)
	}
	return nil
}
