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
