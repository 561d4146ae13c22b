# knemesis build and test entry points. README names two of them:
#   make lmtbench   the main job: compare the transfer backends on this machine
#   make test       every test (installs what the tests need when run as root)
#
# Each component adds its own needs in mk/<component>.mk, so that parallel
# work never edits this file:
#   DEB_PACKAGES += debian packages its tests need
#   TEST_TARGETS += make targets that `make test` runs after the Go tests
# A target that runs go test does it through $(call go_test,NAME,ARGS), so
# that its skips are checked (.ci/check-skips) and its packages timed.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
DEB_PACKAGES :=
TEST_TARGETS :=
GO ?= go
GO_TEST_FLAGS ?= -count=1 -timeout 25m
LMTBENCH_ARGS ?=

# What make test keeps: each go test target's skips (NAME.skips) and its
# packages' seconds (NAME.times), and every step's time (steps).
TEST_OUT := ci/out/make-test
TESTLOG := $(TEST_OUT)/testlog

# $(call go_test,NAME,ARGS): go test ARGS, printed as plain go test prints
# it (ci/testlog), its skips and package times kept under $(TEST_OUT).
go_test = rm -f $(TEST_OUT)/$(1).skips $(TEST_OUT)/$(1).times; \
	$(GO) test -json $(2) | $(TESTLOG) -skips $(TEST_OUT)/$(1).skips -times $(TEST_OUT)/$(1).times

include $(sort $(wildcard mk/*.mk))

.PHONY: all build check-root check-skips deps lint test test-go lmtbench

all: build

build:
	$(GO) build ./...

deps:
	@ci/install-deps.sh $(DEB_PACKAGES)

# The packages that build on arm64 (ci/arm64-packages.sh): all but
# tools/copyprobe and what reaches it. Vetting them for arm64 compiles the
# *_other.go files.
ARM64_PACKAGES = $$(GO=$(GO) ci/arm64-packages.sh)

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')) || { echo "lint: gofmt failed (see above)"; exit 1; }; \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet $(ARM64_PACKAGES)

$(TESTLOG): ci/testlog/main.go
	@mkdir -p $(TEST_OUT)
	$(GO) build -o $@ ./ci/testlog

test-go: $(TESTLOG)
	$(call go_test,test-go,$(GO_TEST_FLAGS) ./...)

# Every skip of the go test targets names a capability this host lacks.
check-skips:
	.ci/check-skips $(wildcard $(TEST_OUT)/*.skips)

# README promises that the eBPF, CMA (Yama), multi-process-as-another-user
# and kernel tests run; as another user than root they would skip. So the
# host part refuses to start instead: `make test-go` alone is the
# unprivileged subset, and says which tests it skips.
check-root:
	@[ "$$(id -u)" = 0 ] || { echo "make test: must run as root: the eBPF, CMA under Yama and other-uid rank tests need it and would skip otherwise (sudo make test; make test-go runs the unprivileged subset)"; exit 1; }

# The steps of make test, in order, each timed; the first that fails ends
# it. $(TEST_OUT)/steps keeps the times.
TEST_STEPS = deps lint test-go $(TEST_TARGETS) check-skips

test: check-root
	@rm -rf $(TEST_OUT) && mkdir -p $(TEST_OUT)
	@$(MAKE) --no-print-directory $(TESTLOG)
	@total=$$(date +%s); for step in $(TEST_STEPS); do \
		start=$$(date +%s); rc=0; \
		$(MAKE) --no-print-directory $$step || rc=$$?; \
		verdict=passed; [ $$rc = 0 ] || verdict=FAILED; \
		echo "make test: $$step $$verdict in $$(( $$(date +%s) - start )) s" | tee -a $(TEST_OUT)/steps; \
		[ $$rc = 0 ] || { cat $(TEST_OUT)/steps; exit $$rc; }; \
	done; \
	echo "make test: all tests passed in $$(( $$(date +%s) - total )) s, on $$(nproc) CPUs:"; \
	cat $(TEST_OUT)/steps

lmtbench:
	$(GO) run ./tools/lmtbench $(LMTBENCH_ARGS)
