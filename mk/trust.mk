# Trust in user space (docs: peerfault package): a fuzz target for every
# parser of what another rank writes, each run for FUZZEXECS inputs by make
# test. Their seed corpora also run in plain go test.
#
# The budget is a count, not a duration: Go 1.26's fuzz coordinator can
# report "context deadline exceeded" as a failure when a duration-based
# -fuzztime ends while a starved worker is mid-call (golang/go#75804, fixed
# in Go 1.27). A count has no deadline to race, so only a real crasher fails.
TEST_TARGETS += fuzz-trust

# Each entry is package:target[:divisor]. FuzzHandleControl builds a whole
# shm channel per input, about 50 times the cost of a parser's input, so it
# runs FUZZEXECS/50 of them.
FUZZEXECS ?= 100000
TRUST_FUZZ := \
	nemesis:FuzzFastbox nemesis:FuzzCell nemesis:FuzzLineRecord \
	nemesis:FuzzAggregateCell nemesis:FuzzArenaDescriptor nemesis:FuzzNetPacket \
	nemesis:FuzzSegmentHeader \
	lmt:FuzzHandleControl:50 lmt:FuzzParseHeader lmt:FuzzDecodeSegments \
	rma:FuzzNotifyRecord

.PHONY: fuzz-trust

fuzz-trust:
	@set -e; for t in $(TRUST_FUZZ); do \
		pkg=$${t%%:*}; fn=$${t#*:}; div=1; \
		case $$fn in *:*) div=$${fn#*:}; fn=$${fn%%:*};; esac; \
		n=$$(( $(FUZZEXECS) / div )); \
		echo "fuzz $$pkg $$fn for $$n inputs"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime=$${n}x -parallel 2 ./$$pkg/; \
	done
