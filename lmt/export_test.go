package lmt

// What tests count Progress calls by.
const (
	IdleCheckEvery = idleCheckEvery
)
