# Nemesis small-message path: the spin model of the Fig. 3 queue and the
# race-detector run of the package (queues under contention across goroutines).
DEB_PACKAGES += spin
TEST_TARGETS += test-model test-race-nemesis

.PHONY: test-model test-race-nemesis

test-model:
	@nemesis/model/check.sh

test-race-nemesis: $(TESTLOG)
	$(call go_test,test-race-nemesis,-race -count=1 -timeout 10m ./nemesis/...)
