# Tools every part of the test suite relies on.
DEB_PACKAGES += make gcc git
