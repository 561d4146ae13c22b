// Package cma is the Cross Memory Attach family of LMT backends
// (process_vm_readv and process_vm_writev, Linux 3.2): one copy, made by
// the kernel on behalf of the calling process, which must be allowed to
// ptrace its peer (PTRACE_MODE_ATTACH_REALCREDS). Importing the package
// registers its backends with package lmt:
//
//	cma        Pull: the RTS carries the sender's address list, the
//	           receiver reads
//	cma-write  Push: the CTS carries the receiver's list, the sender writes
//	cma-split  Split: both lists travel; the receiver reads the first half
//	           while the sender writes the second, two CPUs copying at once
//	multirail  Split, cut by the speed the receiver measured of each rail
//	           (its read, the sender's write) so that both finish together
//	multirail-knem, multirail-shm
//	           multirail with a third rail where the engine has it: the
//	           knem module's copy, or the pair's shm ring
//
//	import _ "github.com/knemesis/knemesis/cma"
//
// A handle names the process by pid and PID namespace: a pid means nothing,
// or another process, outside its namespace, so a receiver in another one
// falls back rather than read through it. Each call moves at most
// Settings.Chunk bytes (4 MiB by default). When the kernel refuses (Yama's ptrace_scope,
// user namespaces, a non-dumpable peer, seccomp), Check says which rule and
// how to lift it, and the engine falls back along its preference list.
package cma
