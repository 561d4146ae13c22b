# Trust in user space (docs: peerfault package): a fuzz target for every
# parser of what another rank writes, each run for FUZZTIME by make test.
# Their seed corpora also run in plain go test.
TEST_TARGETS += fuzz-trust

FUZZTIME ?= 5s
TRUST_FUZZ := \
	nemesis:FuzzFastbox nemesis:FuzzCell nemesis:FuzzLineRecord \
	nemesis:FuzzAggregateCell nemesis:FuzzArenaDescriptor nemesis:FuzzNetPacket \
	nemesis:FuzzSegmentHeader \
	lmt:FuzzHandleControl lmt:FuzzParseHeader lmt:FuzzDecodeSegments \
	rma:FuzzNotifyRecord

.PHONY: fuzz-trust

fuzz-trust:
	@set -e; for t in $(TRUST_FUZZ); do \
		pkg=$${t%%:*}; fn=$${t#*:}; \
		echo "fuzz $$pkg $$fn for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime=$(FUZZTIME) -parallel 2 ./$$pkg/; \
	done
