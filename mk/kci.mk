# The kernel module under QEMU: ci/test-kernel.sh boots every kernel of
# ci/kernels.txt with the modules and the guest tests of ci/guest-tests.txt.
KCI_KERNELS := $(shell grep -v '^[[:space:]]*\(\#\|$$\)' ci/kernels.txt)

DEB_PACKAGES += qemu-system-x86 busybox-static cpio kmod apt dpkg util-linux xz-utils \
	$(addprefix linux-headers-,$(KCI_KERNELS))
TEST_TARGETS += test-kernel

.PHONY: test-kernel
test-kernel:
	@GO=$(GO) ci/test-kernel.sh
