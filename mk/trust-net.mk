# Admission over the network (issue 47): netmod/ofinet's packet admission
# (MAC, sources, tags) fuzzed for TRUST_NET_FUZZEXECS inputs; its seed corpus
# runs in test-netmod with the package's other tests. A count, not a
# duration, for the reason mk/trust.mk gives.
TEST_TARGETS += test-trust-net

TRUST_NET_FUZZEXECS ?= 100000

.PHONY: test-trust-net
test-trust-net:
	$(GO) test -count=1 -tags "$(NETMOD_TAGS)" -run '^$$' -fuzz '^FuzzAdmit$$' -fuzztime $(TRUST_NET_FUZZEXECS)x ./netmod/ofinet
