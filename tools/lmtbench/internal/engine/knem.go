package engine

// knem is listed whether or not it can run, so that `lmtbench info` and
// --backends name it with the reason it cannot: the device is missing, or
// package lmt has no knem backend in this build.
func init() {
	register(Backend{
		Name:    "knem",
		Summary: "LMT through the KNEM-compatible kernel module (one kernel copy, or DMA offload)",
		Check: func() error {
			if err := knemDevice(); err != nil {
				return err
			}
			return lmtRegistered("knem")
		},
		SharedBytes: func(int) int { return 0 },
		Open:        func(p Peer) (Engine, error) { return openLMT(p, "knem") },
	})
}
