package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// molFastest is the Python row whose name starts with prefix with the
// lowest median.
func (pg *page) molFastest(prefix string) (map[string]string, bool) {
	var best map[string]string
	for _, m := range pg.molecules {
		if m["kind"] == "python" && strings.HasPrefix(m["name"], prefix) &&
			(best == nil || num(m, "median_s") < num(best, "median_s")) {
			best = m
		}
	}
	return best, best != nil
}

func (pg *page) molConvertCase() ([]any, []measuredCase) {
	c, ok := rowWith(pg.molecules, "kind", "convert")
	if !ok {
		return nil, nil
	}
	r, rss := num(c, "convert_s")/num(c, "gzip_s"), num(c, "rss_kib")/1024
	return []any{fnum(num(c, "graphs"))}, one(fmt.Sprintf("%.1f× (%s s vs %s s), %.0f MiB", r, fs(num(c, "convert_s")), fs(num(c, "gzip_s")), rss),
		map[string]float64{"ratio": r, "rss_mib": rss})
}

func (pg *page) molEpochCase() ([]any, []measuredCase) {
	ours, ok1 := pg.molFastest("augloader/")
	peer, ok2 := pg.molFastest("pyg/")
	if !ok1 || !ok2 {
		return nil, nil
	}
	r := num(peer, "median_s") / num(ours, "median_s")
	return []any{strings.TrimPrefix(peer["name"], "pyg/dropout_edge/")},
		one(fmt.Sprintf("augloader %s vs PyG %s s/epoch (medians): %.1f×", fs(num(ours, "median_s")), fs(num(peer, "median_s")), r),
			map[string]float64{"speedup": r})
}

// writeMolecules: conversion and the Python epoch on molecule-shaped
// OGB folders (step molecules).
func (pg *page) writeMolecules(w *bytes.Buffer) {
	fmt.Fprintf(w, "## Molecules: OGB folders and edge features (`bench/molecules.sh`)\n\n")
	if pg.molecules == nil {
		w.WriteString("Not run.\n\n")
		return
	}
	fmt.Fprintf(w, "Command: %s (step `molecules`). Data: **synthetic** OGB graph-property folders in the csv.gz layout "+
		"(`shardconv synth --like ogbg-molpcba`: molecule-shaped trees with rings, OGB's 9 atom and 3 bond columns, 128 binary "+
		"tasks with 60%% of the labels missing), not real molecules. %s\n\n", pg.command("molecules"), pg.machineLine())
	if c, ok := rowWith(pg.molecules, "kind", "convert"); ok {
		fmt.Fprintf(w, "**Conversion** of %s molecules: %s MB of csv.gz, %s MB once decompressed; page cache warm, best of 3.\n\n",
			fnum(num(c, "graphs")), fnum(num(c, "gz_bytes")/1e6), fnum(num(c, "raw_bytes")/1e6))
		w.WriteString("| | s | ÷ `gzip -dc` | peak RSS | CPU s |\n|---|---:|---:|---:|---:|\n")
		fmt.Fprintf(w, "| `gzip -dc` of the folder's files to /dev/null (one core) | %s | 1× | | |\n", fs(num(c, "gzip_s")))
		fmt.Fprintf(w, "| `shardconv convert` (every file streamed through gzip, parsed, canonicalised, zstd shards, fsync) | %s | %s | %.0f MiB | %s |\n\n",
			fs(num(c, "convert_s")), fx(num(c, "convert_s")/num(c, "gzip_s")), num(c, "rss_kib")/1024, fs(num(c, "cpu_s")))
		w.WriteString("`gzip -dc` only inflates; the converter inflates the six files on goroutines of their own, parses every " +
			"field of about 130 per molecule (most of them the 128 label fields), canonicalises the edges with their features and " +
			"writes compressed shards. A CPU profile: `go test -run XXX -bench ConvertMolpcba -cpuprofile cpu.out ./ingest/convert`.\n\n")
	}
	var rows []map[string]string
	for _, m := range pg.molecules {
		if m["kind"] == "python" {
			rows = append(rows, m)
		}
	}
	if len(rows) == 0 {
		return
	}
	slices.SortStableFunc(rows, func(a, b map[string]string) int {
		switch x, y := num(a, "median_s"), num(b, "median_s"); {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	fmt.Fprintf(w, "**An epoch to Python in PyG's layout** (%s molecules; int64 `edge_index` [2, 2E], `edge_attr` [2E, 3] and "+
		"`x` [N, 9], `batch`, `y` [B, 128] per batch). Ours: the daemon with NodeSam as `augloader.Daemon` starts it (its runtime on every core but the trainer's: `--procs`), the client over the Unix "+
		"socket (`bench/python_molecules.py`). PyG: OGB's `PygGraphPropPredDataset` of the same folder (processed once, not timed) "+
		"in a `DataLoader` whose dataset applies `dropout_edge(p=0.2)` to each graph and masks `edge_attr` with it, in every "+
		"configuration of workers, persistence and batch size listed; a much lighter augmentation than NodeSam.\n\n", fnum(num(rows[0], "graphs")))
	w.WriteString("| configuration | median s/epoch | best | graphs/s |\n|---|---:|---:|---:|\n")
	for _, m := range rows {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", m["name"], fs(num(m, "median_s")), fs(num(m, "best_s")), fnum(num(m, "graphs_per_s")))
	}
	w.WriteString("\n")
}
