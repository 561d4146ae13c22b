package nemesis

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
)

// memFabric connects the memModules of one process: a network module in
// memory, so that the network path's matching, ordering and failure
// handling are tested in pure Go (package netmod/ofinet tests the same over
// libfabric between network namespaces).
type memFabric struct {
	mu    sync.Mutex
	boxes [][]memPacket // per destination rank
	dead  []bool
	addrs [][]byte
	wg    sync.WaitGroup // the address exchange's barrier
	// regions: what memReader modules exposed, by key.
	regions map[int32][]byte
	nextKey int32
	// serving[src][dst]: src's provider is serving a read by dst (a
	// trickling memReader's), whose bytes go first on the wire from src
	// to dst: src's packets to dst wait behind them, in held.
	serving [][]bool
	held    [][][]memPacket // per source, per destination
}

type memPacket struct{ hdr, payload []byte }

type memModule struct {
	f      *memFabric
	rank   int
	max    int
	sent   []*Request
	errs   []error
	closed bool
	polls  int
}

func newMemFabric(size int) *memFabric {
	f := &memFabric{boxes: make([][]memPacket, size), dead: make([]bool, size), addrs: make([][]byte, size), regions: map[int32][]byte{},
		serving: make([][]bool, size), held: make([][][]memPacket, size)}
	for i := range size {
		f.serving[i], f.held[i] = make([]bool, size), make([][]memPacket, size)
	}
	f.wg.Add(size)
	return f
}

// net returns the Options.Net of rank on nodes.
func (f *memFabric) net(rank int, nodes []int, maxPkt int) *Net {
	m := &memModule{f: f, rank: rank, max: maxPkt}
	return &Net{Module: m, Nodes: nodes, Exchange: func(addr []byte) ([][]byte, error) {
		f.mu.Lock()
		f.addrs[rank] = addr
		f.mu.Unlock()
		f.wg.Done()
		f.wg.Wait()
		return f.addrs, nil
	}}
}

// kill makes rank unreachable: what is sent to it fails, nothing comes from it.
func (f *memFabric) kill(rank int) {
	f.mu.Lock()
	f.dead[rank] = true
	f.mu.Unlock()
}

var errMemLost = errors.New("memnet: connection reset")

func (m *memModule) Provider() string             { return "memnet" }
func (m *memModule) Address() []byte              { return []byte(fmt.Sprint("mem:", m.rank)) }
func (m *memModule) Connect(addrs [][]byte) error { return nil }
func (m *memModule) MaxPacket() int               { return m.max }
func (m *memModule) Close() error                 { m.closed = true; return nil }

func (m *memModule) Send(r *Request, dst int, hdr []byte, payload [][]byte) (bool, error) {
	if len(m.sent) >= 64 {
		return false, nil // no room: the endpoint retries after a Poll
	}
	var pl []byte
	for _, b := range payload {
		pl = append(pl, b...)
	}
	m.f.mu.Lock()
	dead := m.f.dead[dst] || m.f.dead[m.rank]
	pkt := memPacket{append([]byte(nil), hdr...), pl}
	switch held := &m.f.held[m.rank][dst]; {
	case dead:
	case m.f.serving[m.rank][dst] || len(*held) > 0:
		*held = append(*held, pkt) // behind a read's bytes
	default:
		m.f.boxes[dst] = append(m.f.boxes[dst], pkt)
	}
	m.f.mu.Unlock()
	var err error
	if dead {
		err = errMemLost
	}
	m.sent, m.errs = append(m.sent, r), append(m.errs, err)
	return true, nil
}

func (m *memModule) Poll(ev NetEvents) error {
	m.polls++
	sent, errs := m.sent, m.errs
	m.sent, m.errs = nil, nil
	for i, r := range sent {
		ev.Sent(r, errs[i])
	}
	m.f.mu.Lock()
	for src, held := range m.f.held {
		if h := held[m.rank]; len(h) > 0 && !m.f.serving[src][m.rank] {
			m.f.boxes[m.rank] = append(m.f.boxes[m.rank], h...)
			held[m.rank] = nil
		}
	}
	in := m.f.boxes[m.rank]
	m.f.boxes[m.rank] = nil
	m.f.mu.Unlock()
	for _, p := range in {
		if err := ev.Arrived(p.hdr, p.payload); err != nil {
			return err
		}
	}
	return nil
}

var twoNodes = []int{0, 0, 1, 1}

// joinTwoNodes joins four ranks, two per simulated node, in this process.
func joinTwoNodes(t testing.TB, maxPkt int) ([]*Endpoint, *memFabric) {
	return joinTwoNodesWith(t, maxPkt, nil)
}

// joinTwoNodesWith is joinTwoNodes with each rank's module given by wrap
// (nil: the memModule itself).
func joinTwoNodesWith(t testing.TB, maxPkt int, wrap func(r int, m *memModule) NetModule) ([]*Endpoint, *memFabric) {
	t.Helper()
	return joinTwoNodesTimeout(t, maxPkt, wrap, 0)
}

// joinTwoNodesTimeout is joinTwoNodesWith with Net.PeerTimeout peerTimeout
// (0: the default).
func joinTwoNodesTimeout(t testing.TB, maxPkt int, wrap func(r int, m *memModule) NetModule, peerTimeout time.Duration) ([]*Endpoint, *memFabric) {
	t.Helper()
	job := launch.NewJobName()
	f := newMemFabric(4)
	eps := make([]*Endpoint, 4)
	errs := make(chan error, 4)
	for r := range 4 {
		n := f.net(r, twoNodes, maxPkt)
		n.PeerTimeout = peerTimeout
		if wrap != nil {
			n.Module = wrap(r, n.Module.(*memModule))
		}
		go func() {
			ep, err := Join(job, r, 4, &Options{Net: n})
			eps[r] = ep
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, ep := range eps {
			ep.Close()
		}
	})
	return eps, f
}

// onRanks runs fn for every rank in its own goroutine and fails the test
// with the first error.
func onRanks(t *testing.T, eps []*Endpoint, fn func(ep *Endpoint) error) {
	t.Helper()
	errs := make(chan error, len(eps))
	for _, ep := range eps {
		go func() { errs <- fn(ep) }()
	}
	for range eps {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestNetPaths(t *testing.T) {
	eps, _ := joinTwoNodes(t, 4096)
	want := []string{"self", "shm", "net memnet", "net memnet"}
	for i, w := range want {
		if got := eps[0].Path(i); got != w {
			t.Errorf("rank 0's path to rank %d: %q, want %q", i, got, w)
		}
	}
	if got := eps[3].Path(2); got != "shm" {
		t.Errorf("rank 3's path to rank 2: %q, want shm", got)
	}
}

// TestNetAnySource: a wildcard receive matches whichever path delivers,
// each sender's messages arrive in its order, and every byte is intact.
func TestNetAnySource(t *testing.T) {
	eps, _ := joinTwoNodes(t, 4096)
	const perSender = 200
	onRanks(t, eps, func(ep *Endpoint) error {
		if ep.Rank() != 0 {
			for i := range perSender {
				msg := pattern(i*37%9000, ep.Rank()*1000+i)
				if err := ep.Send(0, i%5, msg); err != nil {
					return fmt.Errorf("rank %d send %d: %w", ep.Rank(), i, err)
				}
			}
			return nil
		}
		next := make([]int, 4)
		buf := make([]byte, 9000)
		for range 3 * perSender {
			st, err := ep.Recv(AnySource, AnyTag, buf)
			if err != nil {
				return err
			}
			i := next[st.Source]
			next[st.Source]++
			want := pattern(i*37%9000, st.Source*1000+i)
			if st.Tag != i%5 || st.Len != len(want) || crc32.ChecksumIEEE(buf[:st.Len]) != crc32.ChecksumIEEE(want) {
				return fmt.Errorf("message %d from rank %d: tag %d, %d bytes, want tag %d, %d bytes, checksum of the pattern", i, st.Source, st.Tag, st.Len, i%5, len(want))
			}
		}
		return nil
	})
}

// TestNetSizes sends 0 B to 4 MiB between nodes, by Isend and Isendv,
// probes before receiving, and truncates as the shared-memory path does.
func TestNetSizes(t *testing.T) {
	eps, _ := joinTwoNodes(t, 4096)
	sizes := []int{0, 1, 4095, 4096, 4097, 65536 + 3, 4 << 20}
	onRanks(t, eps, func(ep *Endpoint) error {
		switch ep.Rank() {
		case 1:
			for i, n := range sizes {
				msg := pattern(n, i)
				iov := [][]byte{msg[:n/3], nil, msg[n/3:]}
				if err := ep.Sendv(2, i, iov); err != nil {
					return err
				}
			}
			return ep.Send(2, 99, pattern(100, 9))
		case 2:
			for i, n := range sizes {
				st, err := ep.Probe(1, i)
				if err != nil || st.Len != n {
					return fmt.Errorf("probe %d: %+v, %v; want %d bytes", i, st, err, n)
				}
				buf := make([]byte, n)
				if _, err := ep.Recv(1, i, buf); err != nil {
					return err
				}
				if crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(pattern(n, i)) {
					return fmt.Errorf("%d bytes from rank 1: checksum differs", n)
				}
			}
			buf := make([]byte, 64)
			st, err := ep.Recv(1, 99, buf)
			if !errors.Is(err, ErrTruncated) || st.Len != 100 || string(buf) != string(pattern(100, 9)[:64]) {
				return fmt.Errorf("100 bytes into 64: %+v, %v; want ErrTruncated and the first 64 bytes", st, err)
			}
		}
		return nil
	})
}

// TestNetOrderBothPaths: rank 2 receives from rank 3 (its node) and rank 0
// (the other) with AnySource and a fixed tag interleaved; each pair keeps
// its order.
func TestNetOrderBothPaths(t *testing.T) {
	eps, _ := joinTwoNodes(t, 1024)
	const n = 300
	onRanks(t, eps, func(ep *Endpoint) error {
		switch ep.Rank() {
		case 0, 3:
			for i := range n {
				if err := ep.Send(2, 7, pattern(2000+i, i)); err != nil {
					return err
				}
			}
		case 2:
			next := map[int]int{}
			buf := make([]byte, 4096)
			for k := range 2 * n {
				src := AnySource
				if k%3 == 0 && next[0] < n {
					src = 0
				}
				st, err := ep.Recv(src, 7, buf)
				if err != nil {
					return err
				}
				i := next[st.Source]
				next[st.Source]++
				if st.Len != 2000+i || string(buf[:st.Len]) != string(pattern(2000+i, i)) {
					return fmt.Errorf("message %d from rank %d out of order or damaged (%d bytes)", i, st.Source, st.Len)
				}
			}
		}
		return nil
	})
}

// TestNetPeerLost: a remote rank gone mid-transfer fails the survivors'
// calls with a PeerError naming it, wildcard receives included.
func TestNetPeerLost(t *testing.T) {
	eps, f := joinTwoNodes(t, 4096)
	got := make(chan struct{})
	onRanks(t, eps, func(ep *Endpoint) error {
		switch ep.Rank() {
		case 3:
			if err := ep.Send(0, 1, pattern(10000, 1)); err != nil {
				return err
			}
			<-got
			f.kill(3)
		case 0:
			buf := make([]byte, 1<<20)
			if _, err := ep.Recv(3, 1, buf); err != nil {
				return err
			}
			close(got)
			_, err := ep.Recv(3, 2, buf)
			var pe *PeerError
			if !errors.As(err, &pe) || pe.Rank != 3 || !errors.Is(err, ErrPeerDead) || !errors.Is(err, errMemLost) {
				return fmt.Errorf("receive from the lost rank 3: %v, want a PeerError naming rank 3", err)
			}
			if _, err := ep.Recv(AnySource, 2, buf); !errors.As(err, &pe) || pe.Rank != 3 {
				return fmt.Errorf("wildcard receive after rank 3 was lost: %v, want its PeerError", err)
			}
			if err := ep.Send(3, 1, buf[:10]); !errors.As(err, &pe) || pe.Rank != 3 {
				return fmt.Errorf("send to the lost rank 3: %v, want its PeerError", err)
			}
		}
		return nil
	})
}

func TestNetBadOptions(t *testing.T) {
	f := newMemFabric(4)
	cases := []struct {
		net  *Net
		want string
	}{
		{&Net{Nodes: twoNodes, Exchange: f.net(0, twoNodes, 1).Exchange}, "without a Module"},
		{&Net{Module: f.net(0, twoNodes, 1).Module, Nodes: twoNodes}, "without an Exchange"},
		{f.net(0, []int{0, 1}, 1), "names 2 nodes for a job of 4"},
		{f.net(0, twoNodes, 0), "memnet carries packets of 0 bytes"},
	}
	for _, c := range cases {
		_, err := Join(launch.NewJobName(), 0, 4, &Options{Net: c.net})
		if !errors.Is(err, ErrInvalidArg) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Join: %v, want ErrInvalidArg saying %q", err, c.want)
		}
	}
}

// A job of two ranks on two nodes: rank 1 is reached through the network
// module (here one in memory; netmod/ofinet's over libfabric in a real
// job), and its message enters the same matching as a local one.
func ExampleNet() {
	job := launch.NewJobName()
	f := newMemFabric(2)
	nodes := []int{0, 1}
	done := make(chan error)
	go func() {
		ep, err := Join(job, 1, 2, &Options{Net: f.net(1, nodes, 1024)})
		if err == nil {
			err = ep.Send(0, 7, []byte("hello from node 1"))
			defer ep.Close()
		}
		done <- err
	}()
	ep, err := Join(job, 0, 2, &Options{Net: f.net(0, nodes, 1024)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Close()
	buf := make([]byte, 64)
	st, err := ep.Recv(AnySource, AnyTag, buf)
	fmt.Printf("%q from rank %d, tag %d, by %s: %v\n", buf[:st.Len], st.Source, st.Tag, ep.Path(st.Source), err)
	fmt.Println(<-done)
	// Output:
	// "hello from node 1" from rank 1, tag 7, by net memnet: <nil>
	// <nil>
}

// TestNetAggregateLocalOnly: with the aggregate strategy, a batch to a
// rank on this node leaves in one aggregate cell and a batch to a rank on
// the other node goes through the module message by message (a cell is no
// packet it could carry); both arrive whole and in order.
func TestNetAggregateLocalOnly(t *testing.T) {
	eps, _ := joinTwoNodes(t, 4096)
	msgs := smallMsgs(8, 8, 3)
	recv := func(ep *Endpoint) error {
		buf := make([]byte, 16)
		for i, m := range msgs {
			st, err := ep.Recv(0, AnyTag, buf)
			if err != nil || st.Tag != i || st.Len != len(m) || !bytes.Equal(buf[:st.Len], m) {
				return fmt.Errorf("rank %d, receive %d: %+v, %v; want tag %d, %d bytes intact", ep.Rank(), i, st, err, i, len(m))
			}
		}
		return nil
	}
	onRanks(t, eps, func(ep *Endpoint) error {
		switch ep.Rank() {
		case 0:
			if err := ep.SetStrategy(Aggregate); err != nil {
				return err
			}
			reqs := make([]Request, 16)
			ep.Batch()
			for i, m := range msgs {
				if err := ep.Isend(&reqs[i], 2, i, m); err != nil {
					return err
				}
				if err := ep.Isend(&reqs[8+i], 1, i, m); err != nil {
					return err
				}
			}
			if err := ep.Flush(); err != nil {
				return err
			}
			for i := range reqs {
				if err := ep.Wait(&reqs[i]); err != nil {
					return fmt.Errorf("send %d: %w", i, err)
				}
			}
			if st := ep.Stats(); st.AggregateCells != 1 || st.Aggregated != 8 {
				return fmt.Errorf("rank 0's stats %+v, want one aggregate cell of 8 messages", st)
			}
		case 1, 2:
			return recv(ep)
		}
		return nil
	})
}

// TestNetIdlePollBounded: a rank that awaits nothing from the network
// looks at the module at most once per 64 of its Polls (and per
// netIdlePoll), so that intranode messages do not pay a provider poll each
// few Polls; a receive from a remote rank makes every Poll look.
func TestNetIdlePollBounded(t *testing.T) {
	eps, _ := joinTwoNodes(t, 4096)
	ep := eps[0]
	mod := ep.net.mod.(*memModule)
	for ep.net.inflight > 0 {
		if err := ep.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	const polls = 64 * 100
	before := mod.polls
	for range polls {
		if err := ep.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if got := mod.polls - before; got > polls/64 {
		t.Fatalf("%d Polls awaiting nothing polled the module %d times, want at most %d", polls, got, polls/64)
	}
	var r Request
	if err := ep.Irecv(&r, 2, 1, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	before = mod.polls
	for range 10 {
		if err := ep.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if got := mod.polls - before; got != 10 {
		t.Fatalf("with a receive from remote rank 2 posted, 10 Polls polled the module %d times, want 10", got)
	}
}

// BenchmarkLocalPingPongBesideNet: an 8-byte ping-pong between two ranks of
// one node, in a job whose other node is reached through a network module
// (in memory) and in a job of one node: what Options.Net costs the
// intranode path in nemesis itself, without a provider's threads or
// progress (compare the two lines of one run).
func BenchmarkLocalPingPongBesideNet(b *testing.B) {
	b.Run("net", func(b *testing.B) {
		eps, _ := joinTwoNodes(b, 4096)
		pingPong8(b, eps[0], eps[1])
	})
	b.Run("one-node", func(b *testing.B) {
		eps := joinLocal(b, 2, nil)
		pingPong8(b, eps[0], eps[1])
	})
}

// pingPong8 bounces 8 bytes between a and c (c echoing from a goroutine)
// b.N times.
func pingPong8(b *testing.B, a, c *Endpoint) {
	const tag, stop = 1, 2
	echo := make(chan error, 1)
	go func() {
		buf := make([]byte, 8)
		for {
			st, err := c.Recv(a.Rank(), AnyTag, buf)
			if err != nil || st.Tag == stop {
				echo <- err
				return
			}
			if err := c.Send(a.Rank(), tag, buf); err != nil {
				echo <- err
				return
			}
		}
	}()
	msg, buf := make([]byte, 8), make([]byte, 8)
	for b.Loop() {
		if err := a.Send(c.Rank(), tag, msg); err != nil {
			b.Fatal(err)
		}
		if _, err := a.Recv(c.Rank(), tag, buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := a.Send(c.Rank(), stop, nil); err != nil {
		b.Fatal(err)
	}
	if err := <-echo; err != nil {
		b.Fatal(err)
	}
}

// TestNetBlockedReceiveDozes: a rank with peers on another node dozes too,
// its naps capped at dozeMaxNet, and a remote message that comes meanwhile
// is received.
func TestNetBlockedReceiveDozes(t *testing.T) {
	eps, _ := joinTwoNodes(t, 4096)
	if got := eps[0].dozeLimit(); got != dozeMaxNet {
		t.Fatalf("rank 0's doze limit %v, want dozeMaxNet (%v)", got, dozeMaxNet)
	}
	receiveAfterDoze(t, eps[0], eps[2], "over the net")
}

// TestNetProbeHearsBacklog: a rank that did not run for longer than
// Net.PeerTimeout after probing a peer (an oversubscribed machine) first
// takes what the peer sent meanwhile, and does not take it for lost: rank
// 2 probes rank 0, sleeps past the timeout while rank 0 sends it a
// message, then probes again; rank 0 stays alive and the message is
// received intact.
func TestNetProbeHearsBacklog(t *testing.T) {
	const timeout = 50 * time.Millisecond
	eps, _ := joinTwoNodesTimeout(t, 4096, nil, timeout)
	if err := eps[2].probeRemote(); err != nil {
		t.Fatal(err)
	}
	if eps[2].net.unanswered[0] == 0 {
		t.Fatal("rank 2's probe of rank 0 left no ping unanswered")
	}
	time.Sleep(2 * timeout)
	msg := pattern(1000, 7)
	var s Request
	if err := eps[0].Isend(&s, 2, 7, msg); err != nil {
		t.Fatal(err)
	}
	if err := eps[0].Poll(); err != nil { // hands the packet to the module
		t.Fatal(err)
	}
	if err := eps[2].probeRemote(); err != nil {
		t.Fatal(err)
	}
	if err := eps[2].peers[0].dead; err != nil {
		t.Fatalf("rank 0, whose message waited for rank 2's poll, taken for lost: %v", err)
	}
	buf := make([]byte, 1000)
	if st, err := eps[2].Recv(0, 7, buf); err != nil || st.Len != 1000 || crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(msg) {
		t.Fatalf("rank 2's receive of rank 0's message: %+v, %v; want 1000 bytes intact", st, err)
	}
	if err := eps[0].Wait(&s); err != nil {
		t.Fatal(err)
	}
}
