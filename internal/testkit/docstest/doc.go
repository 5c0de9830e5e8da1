// Package docstest holds no code, only tests that run the commands the
// documentation shows, so the guides cannot drift from the tools.
package docstest
