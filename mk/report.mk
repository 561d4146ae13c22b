# lmtbench --report DIR writes one self-contained HTML page; its test
# (tools/lmtbench/report_test.go) renders the page in headless Chromium
# and checks what was laid out.
DEB_PACKAGES += chromium
