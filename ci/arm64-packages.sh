#!/usr/bin/env bash
# Prints the packages that build on arm64: all but tools/copyprobe and every
# package whose build or tests reach it, directly or through a helper
# package (its BPF object reads x86-64 syscall numbers and uprobe
# registers). `go list -test` lists each test variant with its transitive
# dependencies, so a helper that imports copyprobe excludes its users too.
set -euo pipefail
GO=${GO:-go}
excluded=$(GOARCH=arm64 $GO list -test -f '{{.ImportPath}}|{{join .Deps " "}}' ./... |
	awk -F'|' '$1 ~ /knemesis\/tools\/copyprobe/ || $2 ~ /knemesis\/tools\/copyprobe/ {print $1}' |
	sed -e 's/ \[.*//' -e 's/\.test$//' -e 's/_test$//' | sort -u)
GOARCH=arm64 $GO list ./... | grep -vxF -f <(printf '%s\n' "$excluded")
