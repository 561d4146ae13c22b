package copyprobe

// The BPF object is generated and committed, so that building knemesis needs
// no clang; `make check-bpf-generate` proves the committed object matches
// the source. clang and llvm-strip are pinned to the versions Debian 12
// ships (packages clang-14, llvm-14), whose output is byte-for-byte
// reproducible for this source.
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-14 -strip llvm-strip-14 -target amd64 -no-global-types copyprobe copyprobe.bpf.c -- -O2 -g -Wall -Werror -I/usr/include
