// Package version holds the tool version written into every manifest.
//
// The one source of the version is the file VERSION beside this one: the
// Go binaries embed it, and the Python package's build
// (clients/python/setup.py) and its in-tree import read it, so
// `augloader --version`, `shardconv --version` and augloader.__version__
// agree (internal/testkit/docstest checks they do).
package version

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is the augloader release. It is recorded in shard and epoch
// manifests so that a file can be traced to the code that wrote it.
var Version = strings.TrimSpace(versionFile)
