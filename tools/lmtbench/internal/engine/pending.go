package engine

// The toolkit's own backends are wrapped here as their packages land. Until
// then they are listed, so that `lmtbench info` and --backends name them,
// and each says plainly which package it waits for. None of them produces a
// number before it really runs.
func init() {
	for _, p := range []struct{ name, summary, pkg string }{
		{"shm", "LMT shared-memory double-buffer copy (two user copies)", "lmt"},
		{"pipe", "LMT over a pipe with writev/readv (two kernel copies)", "lmt, pipe"},
		{"vmsplice", "LMT with vmsplice into a pipe, readv out (one kernel copy)", "lmt, vmsplice"},
		{"cma", "LMT with process_vm_readv (one kernel copy)", "lmt"},
		{"knem", "LMT through the KNEM-compatible kernel module (one kernel copy or DMA)", "lmt, kmod/knem"},
		{"auto", "the selector's choice per message size", "lmt, threshold"},
	} {
		register(Backend{
			Name:    p.name,
			Summary: p.summary,
			Check: func() error {
				return &Unavailable{Backend: p.name, Reason: "not in this build yet: waits for package " + p.pkg}
			},
			SharedBytes: func(int) int { return 0 },
			Open: func(Peer) (Engine, error) {
				return nil, &Unavailable{Backend: p.name, Reason: "not in this build yet: waits for package " + p.pkg}
			},
		})
	}
}
