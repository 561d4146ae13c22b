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

.PHONY: all build deps lint test test-go lmtbench

all: build

build:
	$(GO) build ./...

deps:
	@ci/install-deps.sh $(DEB_PACKAGES)

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

test-go:
	$(GO) test $(GO_TEST_FLAGS) ./...

test: deps lint test-go $(TEST_TARGETS)
	@echo "make test: all tests passed"

lmtbench:
	$(GO) run ./tools/lmtbench $(LMTBENCH_ARGS)
