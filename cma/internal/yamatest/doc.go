// Package yamatest holds the tests of the CMA backends under the Yama LSM
// (kernel.yama.ptrace_scope), and nothing else.
//
// The host CI runs on has no Yama; the QEMU guests of ci/test-kernel.sh run
// Debian kernels, which have it. Every test binary listed in
// ci/guest-tests.txt runs whole under TCG in each guest, so these tests live
// in a package of their own whose binary costs seconds there, rather than in
// package lmt, whose transfer matrix would cost minutes.
//
// The tests change ptrace_scope for the whole machine (as root) and put it
// back when they end. Their ranks run as uid 65534: root holds
// CAP_SYS_PTRACE, which Yama scopes 1 and 2 let through.
package yamatest
