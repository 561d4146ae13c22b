package lmt

import "github.com/knemesis/knemesis/lmt/internal/knobs"

// PacketType names the type of a control packet ("RTS", "CTS", "DONE").
func PacketType(pkt []byte) string {
	if len(pkt) == 0 {
		return ""
	}
	return pktType(pkt[0]).String()
}

// Knobs turn the engine's stream scheduling off, one at a time.
type Knobs = knobs.Knobs

// WithKnobs returns cfg with the knobs k.
func WithKnobs(cfg Config, k Knobs) Config {
	cfg.knobs = k
	return cfg
}

// SetRailRates gives e, as the receiver of rank's Split messages, the
// rails' speeds it would have measured (bytes per nanosecond; 0: not
// measured), so that a test knows the cut of the next multirail message.
func SetRailRates(e *Engine, rank int, read, write float64) {
	e.rails[rank] = railRates{ReadRail: read, WriteRail: write}
}

// SetRailRate gives e, as the receiver of rank's Split messages, the speed
// of one rail, as SetRailRates does.
func SetRailRate(e *Engine, rank int, r Rail, rate float64) { e.rails[rank][r] = rate }

// RailRates returns what e measured of the rails of rank's Split messages.
func RailRates(e *Engine, rank int) [NumRails]float64 { return e.rails[rank] }

// SetOffloader gives e's Split backend name the rail of off, usable with
// the peers name is, as an Engine gives multirail-knem knem's.
func SetOffloader(e *Engine, name string, off Offloader) {
	s := e.slot(name)
	s.offload(off, s)
}

// RingLeft returns how many bytes of t's ring-rail piece are still to
// move (0 when it has none).
func RingLeft(t *Transfer) int64 { return t.split.ring.Left() }
