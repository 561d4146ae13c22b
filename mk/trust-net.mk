# Admission over the network (issue 47): netmod/ofinet's packet admission
# (MAC, sources, tags) fuzzed for a few seconds; its seed corpus runs in
# test-netmod with the package's other tests.
TEST_TARGETS += test-trust-net

TRUST_NET_FUZZTIME ?= 5s

.PHONY: test-trust-net
test-trust-net:
	$(GO) test -count=1 -tags "$(NETMOD_TAGS)" -run '^$$' -fuzz '^FuzzAdmit$$' -fuzztime $(TRUST_NET_FUZZTIME) ./netmod/ofinet
