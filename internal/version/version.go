// Package version holds the tool version written into every manifest.
package version

// Version is the augloader release. It is recorded in shard and epoch
// manifests so that a file can be traced to the code that wrote it.
const Version = "0.1.0"
