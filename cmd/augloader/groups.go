package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// flagGroups are the headings of serve's and materialize's --help, in the
// order they print (urfave/cli sorts headings by name: hence the
// numbers), and the flags under each.
var flagGroups = []struct {
	heading string
	flags   []string
}{
	{"1. Data and views", []string{"shards", "materialized", "split", "split-set", "folds", "view", "views", "epochs", "out", "world", "force"}},
	{"2. Augmentation", []string{"seed", "policy", "schedule", "twins", "augment-test", "edge-fill", "rotate", "noise", "cutoff"}},
	{"3. Epoch, batches and shuffle", []string{"batch-size", "remainder", "node-budget", "edge-budget", "max-atoms", "max-edges", "balanced", "shuffle", "max-epoch"}},
	{"4. Memory, caches and workers", []string{"workers", "procs", "memory-budget", "cache-limit", "disk-cache", "disk-cache-limit", "ppr-cache", "no-index", "shm-ring-limit"}},
	{"5. Transports and security", []string{"socket", "socket-mode", "flight", "flight-allow-remote", "flight-token-file", "tls-cert", "tls-key", "wire-compression", "peers", "max-streams", "max-streams-per-client", "max-pending"}},
	{"6. Lifecycle and monitoring", []string{"drain", "metrics", "metrics-allow-remote", "exit-when-stdin-closes", "exit-with-pid", "remove-on-exit"}},
}

// grouped sets each flag's heading from flagGroups; a flag of no group
// is a programming error (its help would print apart from the rest).
func grouped(flags []cli.Flag) []cli.Flag {
	heading := map[string]string{}
	for _, g := range flagGroups {
		for _, f := range g.flags {
			heading[f] = g.heading
		}
	}
	for _, f := range flags {
		h, ok := heading[f.Names()[0]]
		if !ok {
			panic(fmt.Sprintf("flag --%s is in no group of flagGroups", f.Names()[0]))
		}
		switch f := f.(type) {
		case *cli.StringFlag:
			f.Category = h
		case *cli.IntFlag:
			f.Category = h
		case *cli.Uint64Flag:
			f.Category = h
		case *cli.BoolFlag:
			f.Category = h
		case *cli.DurationFlag:
			f.Category = h
		case *cli.Float64Flag:
			f.Category = h
		case *cli.StringSliceFlag:
			f.Category = h
		default:
			panic(fmt.Sprintf("flag --%s: a %T cannot be grouped", f.Names()[0], f))
		}
	}
	return flags
}
