// Package archtest holds no code, only tests of the repository itself:
// the module's layering, package by package (internal/ helpers at the
// bottom; the library's floors; ingest beside shard; app, the commands
// and the test kit on top), that only tests use the test kit, that the
// library pulls no tool-only dependency, and that no compiled binary is
// tracked.
package archtest
