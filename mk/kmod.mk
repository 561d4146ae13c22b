# The KNEM-compatible kernel module (kmod/knem) and the soft DMA provider
# (kmod/softdma).  The host kernel cannot load modules, so here they are only
# built; ci/ boots them in QEMU guests.
#
#   make check-uapi   compile-time check of the uapi header against the ABI
#   make build-kmod   build both modules against every installed Debian
#                     header set (KMOD_KDIRS), warnings are errors
#   make kmod-guest-tests  static C test programs for a guest, in
#                     $(KMOD_OUT)/tests: abi_smoke, semantics, attach, invalidate, trust,
#                     ioctl_stress, copy_bench, attach_bench
#   make kmod-bench-attach  one guest boot running attach_bench: memcpy from
#                     a cached attachment against INLINE_COPY per message,
#                     4 KiB to 1 MiB, both sides and their ratio per size
#                     (emulated CPU: ratios only; KCI_KERNELS picks the
#                     kernel, the first of ci/kernels.txt by default)
#   make kmod-bench-knemlmt  one guest boot running the knem LMT's
#                     BenchmarkCachedMessage: the registration cache's data
#                     path against a single-use region and INLINE_COPY per
#                     message, 4 KiB, 64 KiB, 1 MiB and a 4x16 KiB iovec
#                     list: both times, their ratio
#   make kmod-bench-dma  one guest boot running BenchmarkDMAChannels: a DMA
#                     copy on one channel against the same copy split over
#                     softdma's 2, 256 KiB to 4 MiB: both, their ratio
#   make kmod-bench-multirail  one guest boot running the knem LMT's
#                     BenchmarkMultiRail: cma, cma-write and knem alone,
#                     multirail and multirail-knem, 1 to 16 MiB, each split
#                     backend's speed over the best single rail's

DEB_PACKAGES += gcc make
TEST_TARGETS += check-uapi

# The newest 6.1 ABI (version order: -56 is newer than -9) and every 6.12.
KMOD_KDIRS ?= $(shell ls -d /usr/src/linux-headers-6.1.*-amd64 2>/dev/null | sort -V | tail -n1) \
	$(wildcard /usr/src/linux-headers-6.12.*-amd64)
KMOD_OUT ?= kmod/out

.PHONY: check-uapi build-kmod kmod-guest-tests kmod-bench-attach kmod-bench-knemlmt \
	kmod-bench-dma kmod-bench-multirail

KMOD_GUEST_TESTS := abi_smoke semantics attach invalidate ioctl_stress trust copy_bench attach_bench

# The guest programs are compiled here too, so that a header change that
# breaks them fails on the host, before any guest boots.
check-uapi: kmod-guest-tests
	@mkdir -p $(KMOD_OUT)
	gcc -std=c11 -Wall -Wextra -Werror -o $(KMOD_OUT)/abi_check kmod/knem/uapi/abi_check.c
	$(KMOD_OUT)/abi_check
	@echo "check-uapi: knem_io.h matches KNEM ABI 0xd"

kmod-guest-tests:
	@mkdir -p $(KMOD_OUT)/tests
	@for t in $(KMOD_GUEST_TESTS); do \
		gcc -static -O2 -Wall -Wextra -Werror -o $(KMOD_OUT)/tests/$$t \
			kmod/knem/tests/$$t.c || exit 1; \
	done

build-kmod:
	@set -e; for kdir in $(KMOD_KDIRS); do \
		kmod/build.sh "$$kdir" "$(KMOD_OUT)"; \
	done

kmod-bench-attach: kmod-guest-tests
	ci/test-kernel.sh --run $(KMOD_OUT)/tests/attach_bench

kmod-bench-knemlmt:
	@mkdir -p $(KMOD_OUT)/tests
	CGO_ENABLED=0 $(GO) test -c -o $(KMOD_OUT)/tests/knemlmt.test ./kmod/knem/knemlmt
	ci/test-kernel.sh --run $(KMOD_OUT)/tests/knemlmt.test -- -test.run='^$$' -test.bench=CachedMessage -test.benchtime=0.2s

kmod-bench-dma:
	@mkdir -p $(KMOD_OUT)/tests
	CGO_ENABLED=0 $(GO) test -c -o $(KMOD_OUT)/tests/knem.test ./kmod/knem
	ci/test-kernel.sh --run $(KMOD_OUT)/tests/knem.test -- -test.run='^$$' -test.bench=DMAChannels -test.benchtime=0.2s

kmod-bench-multirail:
	@mkdir -p $(KMOD_OUT)/tests
	CGO_ENABLED=0 $(GO) test -c -o $(KMOD_OUT)/tests/knemlmt.test ./kmod/knem/knemlmt
	ci/test-kernel.sh --run $(KMOD_OUT)/tests/knemlmt.test -- -test.run='^$$' -test.bench=MultiRail -test.benchtime=0.2s
