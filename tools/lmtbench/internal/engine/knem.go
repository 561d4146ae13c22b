package engine

// knem (kmod/knem/knemlmt) is listed whether or not it can run, so that
// `lmtbench info` and --backends name it with the reason it cannot: on a
// host that cannot load modules, /dev/knem is missing.
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
