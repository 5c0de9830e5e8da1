// Package archtest holds no code, only a test of the module's layering:
// the house reads top-down as cmd → server → loader → epoch, aug, shard,
// with wire beside, and the library pulls no tool-only dependency.
package archtest
