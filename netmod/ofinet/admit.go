//go:build ofi

package ofinet

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"

	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/ofi"
	"golang.org/x/sys/unix"
)

// Admission: a packet counts only if it proves that it comes from the
// job. A source address is no proof (tcp;ofi_rxm takes the address a peer
// declares when it connects), so every packet carries a MAC after
// nemesis's header:
//
//	MAC = HMAC-SHA256(K, src ‖ dst ‖ seq ‖ session(dst) ‖ header ‖ payload)[:16]
//
// K is the job key's subkey jobkey.Key.Derive(MACPurpose); src and dst are
// the ranks (32 bits each), seq the number of packets src sent to dst
// before this one (64 bits: it never wraps), session(dst) the 16 random
// bytes dst's module drew at Open and published with its address. The
// sequence travels in no packet: the receiver checks the MAC against the
// next number it expects from src, so a packet accepted once, replayed
// later or to another rank or to a later module of the same rank, fails;
// so does one a sender made without the key. A packet that fails is
// dropped and counted (Refused), before nemesis sees it: it is not
// received, marks no one dead and moves no sequence number.
//
// Where the provider gives sources (FI_SOURCE), a packet that comes from
// another rank's address than the one its header names is refused: a
// cheap first filter, not proof. One from an address the provider does
// not know goes on to the MAC: a rank's connection may come up before its
// address is inserted, and refusing a genuine packet would stop its pair
// for good (the sequence would never move again). A MAC truncated to 128 bits leaves a forger
// one chance in 2^128 per packet.

// MACPurpose is the purpose the module's MAC key is derived for
// (jobkey.Key.Derive).
const MACPurpose = "netmod/mac"

const (
	macSize     = 16 // bytes of MAC after nemesis's header
	sessionSize = 16 // random bytes after the provider's address
	headerSize  = nemesis.NetHeaderSize + macSize
	prefixSize  = 4 + 4 + 8 + sessionSize
)

// Refused counts the packets the module dropped before nemesis saw them.
type Refused struct {
	Forged    uint64 // the MAC did not verify: made without the job's key, or replayed
	Source    uint64 // came from another rank's address than the one its header names
	Malformed uint64 // not a packet of this module: another tag, or no rank of the job named
	Oversize  uint64 // longer than a receive buffer (Config.Packet): dropped by the provider
}

// guard signs the packets a module sends and admits those it receives.
type guard struct {
	mac      hash.Hash // HMAC-SHA256 under the MAC key
	session  [sessionSize]byte
	rank     int                 // this module's, once connected
	sessions [][sessionSize]byte // every rank's, by rank
	rankOf   []int               // the rank of each ofi.Addr inserted
	sendSeq  []uint64            // packets sent to each rank
	recvSeq  []uint64            // packets admitted from each rank
	sources  bool                // the provider says where packets come from
	prefix   [prefixSize]byte
	sum      [sha256.Size]byte
	refused  Refused
}

// newGuard keys a guard with key, or with the launcher's (jobkey.FromEnv)
// when key is zero, and draws its session.
func newGuard(key jobkey.Key) (*guard, error) {
	if key.IsZero() {
		k, err := jobkey.FromEnv()
		if err != nil {
			return nil, fmt.Errorf("ofinet: packets between nodes are signed with the job's key: set Config.JobKey: %w", err)
		}
		key = k
	}
	mk := key.Derive(MACPurpose)
	g := &guard{mac: hmac.New(sha256.New, mk[:]), rank: -1}
	if _, err := unix.Getrandom(g.session[:], 0); err != nil {
		return nil, fmt.Errorf("ofinet: drawing the module's session: getrandom: %w", err)
	}
	return g, nil
}

// connect learns every rank's session from its published address (the
// provider's address then the session) and returns the provider's
// addresses; it finds this module's rank by its own address.
func (g *guard) connect(self []byte, addrs [][]byte) ([][]byte, error) {
	names := make([][]byte, len(addrs))
	g.sessions = make([][sessionSize]byte, len(addrs))
	g.sendSeq, g.recvSeq = make([]uint64, len(addrs)), make([]uint64, len(addrs))
	g.rank = -1
	for r, a := range addrs {
		if len(a) <= sessionSize {
			return nil, fmt.Errorf("%w: ofinet: address of rank %d is %d bytes, too short to end in a %d-byte session",
				ofi.ErrInvalidArg, r, len(a), sessionSize)
		}
		names[r] = a[:len(a)-sessionSize]
		copy(g.sessions[r][:], a[len(a)-sessionSize:])
		if string(a) == string(self) {
			g.rank = r
		}
	}
	if g.rank < 0 {
		return nil, fmt.Errorf("%w: ofinet: this module's address is none of the %d ranks'", ofi.ErrInvalidArg, len(addrs))
	}
	return names, nil
}

// inserted records that addr is rank's, as the address vector numbered it.
func (g *guard) inserted(rank int, addr ofi.Addr) {
	for uint64(len(g.rankOf)) <= uint64(addr) {
		g.rankOf = append(g.rankOf, -1)
	}
	g.rankOf[addr] = rank
}

// sign writes the MAC of the next packet to dst into hdr's trailer.
func (g *guard) sign(dst int, hdr []byte, payload [][]byte) {
	g.begin(g.rank, dst, g.sendSeq[dst], hdr[:nemesis.NetHeaderSize])
	for _, b := range payload {
		g.mac.Write(b)
	}
	g.mac.Sum(g.sum[:0])
	copy(hdr[nemesis.NetHeaderSize:headerSize], g.sum[:macSize])
}

// sent counts the packet to dst that sign signed as handed to the provider.
func (g *guard) sent(dst int) { g.sendSeq[dst]++ }

// begin starts the HMAC of one packet: what precedes its payload.
func (g *guard) begin(src, dst int, seq uint64, hdr []byte) {
	p := g.prefix[:]
	binary.LittleEndian.PutUint32(p[0:], uint32(src))
	binary.LittleEndian.PutUint32(p[4:], uint32(dst))
	binary.LittleEndian.PutUint64(p[8:], seq)
	copy(p[16:], g.sessions[dst][:])
	g.mac.Reset()
	g.mac.Write(p)
	g.mac.Write(hdr)
}

// admit reports whether a received packet comes from the job, and from
// which rank; a packet it refuses is counted, and no sequence moves.
func (g *guard) admit(src ofi.Addr, tag uint64, hdr, payload []byte) (int, bool) {
	rank := nemesis.NetHeaderSource(hdr)
	switch {
	case tag != packetTag || len(hdr) != headerSize || rank < 0 || rank >= len(g.recvSeq) || rank == g.rank:
		g.refused.Malformed++
		return -1, false
	case g.sources && src != ofi.UnknownAddr && (uint64(src) >= uint64(len(g.rankOf)) || g.rankOf[src] != rank):
		g.refused.Source++
		return -1, false
	}
	g.begin(rank, g.rank, g.recvSeq[rank], hdr[:nemesis.NetHeaderSize])
	g.mac.Write(payload)
	g.mac.Sum(g.sum[:0])
	if !hmac.Equal(g.sum[:macSize], hdr[nemesis.NetHeaderSize:headerSize]) {
		g.refused.Forged++
		return -1, false
	}
	g.recvSeq[rank]++
	return rank, true
}
