// Package testkit gathers what only tests use: fixture (seeded synthetic
// and real datasets converted once per test binary), testutil (the
// repository's root, the shared datasets, golden files), and the
// repository's own checks (archtest, docstest). No package outside it
// imports it except from tests (archtest.TestTestkitOnlyInTests).
package testkit
