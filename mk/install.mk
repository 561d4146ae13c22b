# Install like a site: the binaries, and the knem module's source under
# DKMS with its udev rule, so that every kernel the site installs later
# gets the module built by DKMS's autoinstall.
#
#   make install [DESTDIR=/staging] [PREFIX=/usr/local]
#       lmtbench to $(PREFIX)/bin; kmod/knem/{module,uapi} and dkms.conf to
#       /usr/src/knem-<version>; 99-knem.rules to /etc/udev/rules.d.
#       Without DESTDIR, and with dkms installed, also dkms add, build
#       and install for the running kernel, then reload udev's rules.
#   make uninstall      dkms remove, and the files above
#   make dkms-test      ci/dkms-test.sh: the DKMS package built and installed
#                       through dkms against each guest kernel's headers, in
#                       a private DKMS tree; that tree booted in the QEMU
#                       guest with udev (systemd-udevd, udevadm: package
#                       udev), loaded by modprobe, tested, removed
DEB_PACKAGES += dkms udev
TEST_TARGETS += dkms-test

PREFIX ?= /usr/local
DESTDIR ?=
KNEM_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' kmod/knem/dkms.conf)
KNEM_SRC = $(DESTDIR)/usr/src/knem-$(KNEM_VERSION)
UDEV_RULES = $(DESTDIR)/etc/udev/rules.d

.PHONY: install uninstall dkms-test

install:
	install -d $(DESTDIR)$(PREFIX)/bin $(KNEM_SRC)/module $(KNEM_SRC)/uapi $(UDEV_RULES)
	$(GO) build -o $(DESTDIR)$(PREFIX)/bin/lmtbench ./tools/lmtbench
	install -m 0644 kmod/knem/module/Kbuild kmod/knem/module/Makefile \
		kmod/knem/module/*.c kmod/knem/module/*.h $(KNEM_SRC)/module/
	install -m 0644 kmod/knem/uapi/knem_io.h $(KNEM_SRC)/uapi/
	install -m 0644 kmod/knem/dkms.conf $(KNEM_SRC)/dkms.conf
	install -m 0644 kmod/knem/99-knem.rules $(UDEV_RULES)/99-knem.rules
	@if [ -z "$(DESTDIR)" ] && command -v dkms >/dev/null; then \
		set -e; \
		dkms status -m knem -v $(KNEM_VERSION) | grep -q . || dkms add -m knem -v $(KNEM_VERSION); \
		dkms build -m knem -v $(KNEM_VERSION) && dkms install -m knem -v $(KNEM_VERSION); \
		if command -v udevadm >/dev/null; then udevadm control --reload-rules || true; fi; \
		echo "knem $(KNEM_VERSION) installed through DKMS: modprobe knem creates /dev/knem (mode 0666)"; \
	elif [ -z "$(DESTDIR)" ]; then \
		echo "dkms not installed: the module source is in /usr/src/knem-$(KNEM_VERSION); apt-get install dkms, then dkms install -m knem -v $(KNEM_VERSION)"; \
	fi

uninstall:
	@if [ -z "$(DESTDIR)" ] && command -v dkms >/dev/null && dkms status -m knem -v $(KNEM_VERSION) | grep -q .; then \
		dkms remove -m knem -v $(KNEM_VERSION) --all; \
	fi
	rm -rf $(KNEM_SRC)
	rm -f $(DESTDIR)$(PREFIX)/bin/lmtbench $(UDEV_RULES)/99-knem.rules

dkms-test:
	@GO=$(GO) ci/dkms-test.sh
