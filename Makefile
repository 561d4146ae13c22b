# knemesis build and test entry points. README names two of them:
#   make lmtbench   the main job: compare the transfer backends on this machine
#   make test       every test (installs what the tests need when run as root)
#
# Each component adds its own needs in mk/<component>.mk, so that parallel
# work never edits this file:
#   DEB_PACKAGES += debian packages its tests need
#   TEST_TARGETS += make targets that `make test` runs after the Go tests

DEB_PACKAGES :=
TEST_TARGETS :=
GO ?= go
GO_TEST_FLAGS ?= -count=1 -timeout 25m
LMTBENCH_ARGS ?=

include $(sort $(wildcard mk/*.mk))

.PHONY: all build check-root deps lint test test-go lmtbench

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

test-go:
	$(GO) test $(GO_TEST_FLAGS) ./...

# README promises that the eBPF, CMA (Yama), multi-process-as-another-user
# and kernel tests run; as another user than root they would skip. So the
# host part refuses to start instead: `make test-go` alone is the
# unprivileged subset, and says which tests it skips.
check-root:
	@[ "$$(id -u)" = 0 ] || { echo "make test: must run as root: the eBPF, CMA under Yama and other-uid rank tests need it and would skip otherwise (sudo make test; make test-go runs the unprivileged subset)"; exit 1; }

test: check-root deps lint test-go $(TEST_TARGETS)
	@echo "make test: all tests passed"

lmtbench:
	$(GO) run ./tools/lmtbench $(LMTBENCH_ARGS)
