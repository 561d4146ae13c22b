// Package knemtest holds the tests of rma's knem windows, and nothing
// else: they need /dev/knem, which the host CI runs on lacks (it loads no
// modules) and the QEMU guests of ci/test-kernel.sh have. Every binary of
// ci/guest-tests.txt runs whole under TCG in each guest, so these live in
// a package of their own whose binary costs seconds there, rather than in
// package rma, whose tests over every mechanism would cost minutes.
package knemtest
