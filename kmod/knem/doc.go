// Package knem is the Go interface to /dev/knem.
package knem
