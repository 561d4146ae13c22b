//go:build ofi

package ofinet

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"testing"

	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/ofi"
)

// nemesis's packet kinds, as its header carries them (nemesis/endpoint.go,
// nemesis/netmod.go).
const (
	kindMsg     = 1
	kindControl = 4
	kindNetPing = 16
	kindNetBye  = 18
)

// netHdr is a nemesis packet header: kind, source, sequence, tag, bytes
// in this packet, total of the message.
func netHdr(kind uint32, src int, seq uint32, tag, n int, total uint64) []byte {
	h := make([]byte, headerSize)
	binary.LittleEndian.PutUint32(h[0:], kind)
	binary.LittleEndian.PutUint32(h[4:], uint32(src))
	binary.LittleEndian.PutUint32(h[8:], seq)
	binary.LittleEndian.PutUint32(h[12:], uint32(tag))
	binary.LittleEndian.PutUint32(h[16:], uint32(n))
	binary.LittleEndian.PutUint64(h[24:], total)
	return h
}

var fixedKey = func() jobkey.Key {
	k, err := jobkey.Parse("6b6e656d657369732074727573742d6e6574206669786564206b6579212121ff")
	if err != nil {
		panic(err)
	}
	return k
}()

// guards returns the guards of a job of size ranks keyed with key, each
// connected as if rank r's provider address were "addr r" and Addr(r),
// their sessions drawn from seed (the same seed, the same sessions).
func guards(t testing.TB, key jobkey.Key, size, seed int) []*guard {
	t.Helper()
	gs := make([]*guard, size)
	addrs := make([][]byte, size)
	for r := range gs {
		g, err := newGuard(key)
		if err != nil {
			t.Fatal(err)
		}
		g.sources = true
		copy(g.session[:], pattern(sessionSize, seed*10+r))
		gs[r] = g
		addrs[r] = append([]byte{'a', 'd', 'd', 'r', ' ', byte('0' + r)}, g.session[:]...)
	}
	for r, g := range gs {
		names, err := g.connect(addrs[r], addrs)
		if err != nil || g.rank != r || string(names[r]) != string(addrs[r][:6]) {
			t.Fatalf("guard %d: connect: %v, rank %d, name %q", r, err, g.rank, names[r])
		}
		for k := range gs {
			g.inserted(k, ofi.Addr(k))
		}
	}
	return gs
}

// signed is what g's rank sends to dst: hdr with its MAC, the payload.
func signed(g *guard, dst int, hdr, payload []byte) []byte {
	h := bytes.Clone(hdr)
	g.sign(dst, h, [][]byte{payload[:len(payload)/2], payload[len(payload)/2:]})
	g.sent(dst)
	return h
}

// TestAdmit: rank 1 admits rank 0's packets in order, and refuses, each
// under its count, a replay, a packet from another address than rank
// 0's, from an address never inserted, of another tag, naming no rank or
// itself, signed with another key, for an earlier module of rank 1, or
// altered in its header or payload; none moves the sequence, so the next
// genuine packet is admitted.
func TestAdmit(t *testing.T) {
	gs := guards(t, fixedKey, 3, 1)
	other := guards(t, jobkey.Key{1}, 3, 1) // the same sessions
	reopened := guards(t, fixedKey, 3, 2)   // the same key
	other[0].sendSeq[1], reopened[0].sendSeq[1] = 3, 3
	payload := pattern(100, 1)
	var pkts [][]byte
	for i := range 3 {
		pkts = append(pkts, signed(gs[0], 1, netHdr(kindMsg, 0, uint32(i), 7, len(payload), uint64(len(payload))), payload))
	}
	next := signed(gs[0], 1, netHdr(kindMsg, 0, 3, 7, len(payload), uint64(len(payload))), payload)
	for i, p := range pkts {
		if r, ok := gs[1].admit(0, packetTag, p, payload); !ok || r != 0 {
			t.Fatalf("genuine packet %d: admitted %v from rank %d", i, ok, r)
		}
	}
	tampered := bytes.Clone(payload)
	tampered[50] ^= 1
	huge := bytes.Clone(next)
	binary.LittleEndian.PutUint64(huge[24:], 1<<62)
	selfHdr := signed(gs[1], 2, netHdr(kindMsg, 1, 0, 7, len(payload), uint64(len(payload))), payload)
	attacks := []struct {
		name    string
		src     ofi.Addr
		tag     uint64
		hdr     []byte
		payload []byte
		want    Refused
	}{
		{"replay of packet 1", 0, packetTag, pkts[1], payload, Refused{Forged: 1}},
		{"from rank 2's address", 2, packetTag, next, payload, Refused{Source: 1}},
		{"replayed from an address never inserted", ofi.UnknownAddr, packetTag, pkts[1], payload, Refused{Forged: 1}},
		{"of another tag", 0, packetTag + 1, next, payload, Refused{Malformed: 1}},
		{"naming rank 9", 0, packetTag, netHdr(kindMsg, 9, 0, 7, 0, 0), nil, Refused{Malformed: 1}},
		{"naming rank 1 itself", 1, packetTag, selfHdr, payload, Refused{Malformed: 1}},
		{"with a short header", 0, packetTag, next[:nemesis.NetHeaderSize], payload, Refused{Malformed: 1}},
		{"signed with another key", 0, packetTag, signed(other[0], 1, netHdr(kindMsg, 0, 3, 7, 100, 100), payload), payload, Refused{Forged: 1}},
		{"for an earlier module of rank 1", 0, packetTag, signed(reopened[0], 1, netHdr(kindMsg, 0, 3, 7, 100, 100), payload), payload, Refused{Forged: 1}},
		{"with its payload altered", 0, packetTag, next, tampered, Refused{Forged: 1}},
		{"with its total raised", 0, packetTag, huge, payload, Refused{Forged: 1}},
		{"forged goodbye", 0, packetTag, netHdr(kindNetBye, 0, 0, 0, 0, 0), nil, Refused{Forged: 1}},
	}
	for _, a := range attacks {
		before := gs[1].refused
		if r, ok := gs[1].admit(a.src, a.tag, a.hdr, a.payload); ok {
			t.Errorf("packet %s: admitted from rank %d", a.name, r)
		}
		got := gs[1].refused
		got.Forged -= before.Forged
		got.Source -= before.Source
		got.Malformed -= before.Malformed
		if got != a.want {
			t.Errorf("packet %s: counted %+v, want %+v", a.name, got, a.want)
		}
	}
	if r, ok := gs[1].admit(0, packetTag, next, payload); !ok || r != 0 {
		t.Fatalf("genuine packet 3 after the refusals: admitted %v from rank %d; a refusal moved the sequence", ok, r)
	}
}

// FuzzAdmit: whatever arrives, admit neither panics nor admits anything
// but the one packet rank 0 signed next; what it refuses it counts once
// and the sequence stays.
func FuzzAdmit(f *testing.F) {
	seed := guards(f, fixedKey, 2, 1)
	payload := pattern(24, 2)
	genuine := signed(seed[0], 1, netHdr(kindMsg, 0, 0, 5, len(payload), uint64(len(payload))), payload)
	f.Add(uint64(0), uint64(packetTag), genuine, payload)
	f.Add(uint64(1), uint64(packetTag), genuine, payload)
	f.Add(uint64(0), uint64(packetTag), netHdr(kindNetBye, 0, 0, 0, 0, 0), []byte{})
	f.Add(uint64(0), uint64(packetTag), netHdr(kindMsg, 0, 0, 0, 8, 1<<62), pattern(8, 3))
	f.Add(uint64(0), uint64(packetTag), netHdr(kindControl, 0xffffffff, 0, 0, 0, 0), []byte{})
	f.Add(uint64(0), uint64(0), genuine[:10], payload)
	f.Fuzz(func(t *testing.T, src, tag uint64, hdr, payload []byte) {
		gs := guards(t, fixedKey, 2, 1)
		want := signed(gs[0], 1, netHdr(kindMsg, 0, 0, 5, 24, 24), pattern(24, 2))
		g := gs[1]
		r, ok := g.admit(ofi.Addr(src), tag, hdr, payload)
		refused := g.refused.Forged + g.refused.Source + g.refused.Malformed + g.refused.Oversize
		if ok {
			if r != 0 || src != 0 && ofi.Addr(src) != ofi.UnknownAddr || tag != packetTag || !bytes.Equal(hdr, want) || !bytes.Equal(payload, pattern(24, 2)) || g.recvSeq[0] != 1 || refused != 0 {
				t.Fatalf("admitted a packet rank 0 never signed: rank %d, src %d, tag %#x, header %x, %d bytes", r, src, tag, hdr, len(payload))
			}
			return
		}
		if refused != 1 || g.recvSeq[0] != 0 || g.recvSeq[1] != 0 {
			t.Fatalf("refused packet counted %+v (want one count), sequences %v", g.refused, g.recvSeq)
		}
	})
}

// TestOutsider: a process outside the job (an endpoint of the same
// provider without the key) that knows both ranks' addresses sends rank 1
// forged messages, a forged goodbye and ping, huge totals, packets of
// another tag, replays of every packet rank 0 sent it and, last, a packet
// longer than the receive buffers; rank 0 gets the replays of rank 1's.
// First with the provider's sources checked (the outsider's address is
// unknown to it, which leaves the MAC to decide), then as if the provider
// gave no sources.
// Nothing is received, every packet is counted as refused, no rank is
// taken for dead, and the job's own traffic in both directions, before
// and after, arrives whole.
func TestOutsider(t *testing.T) {
	eps := joinPair(t)
	mods := [2]*Module{eps[0].NetModule().(*Module), eps[1].NetModule().(*Module)}
	var captured [2][][2][]byte // by sender: header and payload as sent
	for r, m := range mods {
		m.captured = func(dst int, hdr []byte, payload [][]byte) {
			captured[r] = append(captured[r], [2][]byte{bytes.Clone(hdr), bytes.Join(payload, nil)})
		}
	}
	pairTraffic(t, eps, 1)
	out, to := outsider(t, mods)
	for _, m := range mods {
		m.captured = nil
	}

	n0, n1 := uint64(len(captured[0])), uint64(len(captured[1]))
	attack(t, eps, out, to, captured, Refused{Forged: 4 + n0, Malformed: 1}, Refused{Forged: n1})
	for _, m := range mods {
		m.g.sources = false
	}
	// A fresh outsider: the first one's oversize packet stops its
	// connection.
	out, to = outsider(t, mods)
	before := [2]Refused{mods[0].Refused(), mods[1].Refused()}
	attack(t, eps, out, to, captured,
		plus(before[1], Refused{Forged: 4 + n0, Malformed: 1}), plus(before[0], Refused{Forged: n1}))
	sendOversize(t, eps, out, to[1])
	awaitRefused(t, eps, mods[1], plus(before[1], Refused{Forged: 4 + n0, Malformed: 1, Oversize: 1}))
	for r, ep := range eps {
		if st, ok, err := ep.Iprobe(nemesis.AnySource, nemesis.AnyTag); ok || err != nil {
			t.Fatalf("rank %d after the attacks: a message from rank %d (%d bytes, tag %d) waits, error %v", r, st.Source, st.Len, st.Tag, err)
		}
	}
	pairTraffic(t, eps, 2)
}

func plus(a, b Refused) Refused {
	return Refused{a.Forged + b.Forged, a.Source + b.Source, a.Malformed + b.Malformed, a.Oversize + b.Oversize}
}

// outsider opens an endpoint outside the job and inserts both ranks'
// provider addresses.
func outsider(t *testing.T, mods [2]*Module) (*ofi.Endpoint, [2]ofi.Addr) {
	t.Helper()
	out, err := ofi.Open(ofi.Config{Provider: provider, Node: "127.0.0.1", HeaderSize: headerSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	var to [2]ofi.Addr
	for r, m := range mods {
		if to[r], err = out.Insert(m.e.Name(), "victim"); err != nil {
			t.Fatal(err)
		}
	}
	return out, to
}

// attack sends the outsider's packets (see TestOutsider) and waits until
// ranks 1 and 0 have refused them all, as want1 and want0 count.
func attack(t *testing.T, eps [2]*nemesis.Endpoint, out *ofi.Endpoint, to [2]ofi.Addr, captured [2][][2][]byte, want1, want0 Refused) {
	t.Helper()
	forgedMAC := netHdr(kindMsg, 0, 0, 3, 8, 8)
	copy(forgedMAC[nemesis.NetHeaderSize:], pattern(macSize, 9))
	forged := [][]byte{
		forgedMAC,
		netHdr(kindNetBye, 0, 0, 0, 0, 0),
		netHdr(kindNetPing, 0, 0, 0, 0, 0),
		netHdr(kindMsg, 0, 0, 3, 8, 1<<62),
	}
	for _, h := range forged {
		outSend(t, eps, out, to[1], packetTag, h, pattern(int(binary.LittleEndian.Uint32(h[16:])), 4))
	}
	outSend(t, eps, out, to[1], packetTag+1, netHdr(kindMsg, 0, 0, 3, 0, 1<<40), nil)
	for _, p := range captured[0] {
		outSend(t, eps, out, to[1], packetTag, p[0], p[1])
	}
	for _, p := range captured[1] {
		outSend(t, eps, out, to[0], packetTag, p[0], p[1])
	}
	mods := [2]*Module{eps[0].NetModule().(*Module), eps[1].NetModule().(*Module)}
	awaitRefused(t, eps, mods[1], want1)
	awaitRefused(t, eps, mods[0], want0)
}

func sendOversize(t *testing.T, eps [2]*nemesis.Endpoint, out *ofi.Endpoint, to ofi.Addr) {
	t.Helper()
	outSend(t, eps, out, to, packetTag, netHdr(kindMsg, 0, 0, 3, DefaultPacket+1, DefaultPacket+1), pattern(DefaultPacket+1, 5))
}

// outSend sends one message from the outsider, polling the job meanwhile.
func outSend(t *testing.T, eps [2]*nemesis.Endpoint, out *ofi.Endpoint, to ofi.Addr, tag uint64, hdr, payload []byte) {
	t.Helper()
	var r ofi.Request
	if err := out.Isend(&r, to, tag, hdr, [][]byte{payload}); err != nil {
		t.Fatal(err)
	}
	for !r.Done() {
		if _, err := out.Poll(); err != nil {
			t.Fatal(err)
		}
		pollAll(t, eps)
	}
	if r.Err() != nil {
		t.Fatalf("the outsider's send: %v", r.Err())
	}
}

// awaitRefused polls the job until m has refused as many packets as want
// counts in all, and checks it counted them so.
func awaitRefused(t *testing.T, eps [2]*nemesis.Endpoint, m *Module, want Refused) {
	t.Helper()
	total := func(r Refused) uint64 { return r.Forged + r.Source + r.Malformed + r.Oversize }
	for total(m.Refused()) < total(want) {
		pollAll(t, eps)
	}
	if got := m.Refused(); got != want {
		t.Fatalf("rank %d refused %+v, want %+v", m.g.rank, got, want)
	}
}

func pollAll(t *testing.T, eps [2]*nemesis.Endpoint) {
	t.Helper()
	for _, ep := range eps {
		if err := ep.Poll(); err != nil {
			t.Fatalf("rank %d: %v", ep.Rank(), err)
		}
	}
}

// pairTraffic sends messages of one packet and of several each way and
// checks them by checksum.
func pairTraffic(t *testing.T, eps [2]*nemesis.Endpoint, seed int) {
	t.Helper()
	for _, n := range []int{0, 8, DefaultPacket, 3*DefaultPacket + 5} {
		for from := range eps {
			to := 1 - from
			msg := pattern(n, seed*100+n+from)
			buf := make([]byte, n)
			var s, r nemesis.Request
			if err := eps[from].Isend(&s, to, 11, msg); err != nil {
				t.Fatal(err)
			}
			if err := eps[to].Irecv(&r, from, 11, buf); err != nil {
				t.Fatal(err)
			}
			for !s.Done() || !r.Done() {
				pollAll(t, eps)
			}
			_, serr := eps[from].Test(&s)
			_, rerr := eps[to].Test(&r)
			if serr != nil || rerr != nil || r.Status().Count != n || crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(msg) {
				t.Fatalf("%d bytes from rank %d to %d: send %v, receive %v, %d bytes, checksum differs: %v",
					n, from, to, serr, rerr, r.Status().Count, crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(msg))
			}
		}
	}
}

// BenchmarkMAC: signing a packet at the sender and admitting it at the
// receiver, for an 8-byte payload and a full packet.
func BenchmarkMAC(b *testing.B) {
	for _, n := range []int{8, DefaultPacket} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			gs := guards(b, fixedKey, 2, 1)
			payload := pattern(n, 1)
			hdr := netHdr(kindMsg, 0, 0, 7, n, uint64(n))
			iov := [][]byte{payload}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				gs[0].sign(1, hdr, iov)
				gs[0].sent(1)
				if _, ok := gs[1].admit(0, packetTag, hdr, payload); !ok {
					b.Fatal("a signed packet was refused")
				}
			}
		})
	}
}
