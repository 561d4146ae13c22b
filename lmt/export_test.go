package lmt

// What tests count Progress calls by.
const (
	IdleCheckEvery = idleCheckEvery
)

// PacketType names the type of a control packet ("RTS", "CTS", "DONE").
func PacketType(pkt []byte) string {
	if len(pkt) == 0 {
		return ""
	}
	return pktType(pkt[0]).String()
}
