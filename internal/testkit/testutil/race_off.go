//go:build !race

package testutil

// RaceEnabled reports whether the race detector is on (heavy tests skip).
const RaceEnabled = false
