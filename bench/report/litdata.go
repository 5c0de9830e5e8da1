package main

import (
	"bytes"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// writeLitData: LitData (Lightning's streaming loader) beside augloader on
// the real COLLAB (#68), from bench/peers/litdata_collab.py's RESULT lines
// (step litdata): its conversion, every loader configuration, the fastest
// paired with ours, and the checks of the feature table (docs/compare.md).
func (pg *page) writeLitData(w *bytes.Buffer) {
	if !section(w, "LitData beside augloader (`bench/peers/litdata_collab.py`)", "litdata.txt", pg.litdata) {
		return
	}
	about, _ := rowWith(pg.litdata, "kind", "about")
	fmt.Fprintf(w, "Command: %s (step `litdata`; `.venv-peers`: litdata %s, PyG %s, torch %s). The real COLLAB's %s graphs as the PyG peer "+
		"holds them (`torch_geometric.data.Data`: one-hot degree `x`, both edge directions, `y`) written by `litdata.optimize` "+
		"(2 workers, `chunk_bytes=\"64MB\"`) either as they are (*dense*) or with each node's degree code in `x` (*codes*, the one-hot "+
		"built by the transform as PyG's `OneHotDegree` would), uncompressed or zstd; read by `StreamingDataset(shuffle=True)` with "+
		"`dropout_edge(p=0.2)` as its transform in a `StreamingDataLoader(batch_size=32)`, PyG `Batch`es out; every configuration "+
		"of workers 0, 1 and 2, persistent or not, then the fastest with `item_shuffle_window` 0 (a full in-chunk permutation), 64 "+
		"and 1024 (its default is 256). CPU: the trainer's process and its DataLoader workers (`bench/peers/cpuclock.py`). %s\n\n",
		pg.command("litdata"), about["litdata"], about["torch_geometric"], strings.SplitN(about["torch"], "+", 2)[0], about["graphs"], pg.machineLine())
	w.WriteString("| conversion | s | MB stored |\n|---|---:|---:|\n")
	for _, m := range pg.litdata {
		if m["kind"] == "litdata-optimize" {
			fmt.Fprintf(w, "| `litdata.optimize`, %s, compression %s (from the Data in memory) | %s | %.0f |\n",
				m["storage"], m["compression"], fs(num(m, "seconds")), num(m, "bytes")/1e6)
		}
	}
	if pg.convert != nil {
		fmt.Fprintf(w, "| `shardconv convert` of the TU text (parsing it too; step `convert`) | %s | %.0f |\n",
			fs(pg.convert["convert_s"]), num(about, "shard_bytes")/1e6)
	}
	fast, _ := rowWith(pg.litdata, "kind", "litdata-fastest")
	w.WriteString("\n| LitData configuration | wall s/epoch | loader CPU s/epoch | graphs/s |\n|---|---:|---:|---:|\n")
	for _, m := range pg.litdata {
		if m["kind"] != "litdata" {
			continue
		}
		name := "`" + m["name"] + "`"
		if m["name"] == fast["name"] {
			name = "**" + name + "** (fastest)"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, fs(num(m, "wall_s")), fs(num(m, "loader_cpu_s")),
			fnum(num(m, "graphs")/num(m, "wall_s")))
	}
	ours, ok1 := rowWith(pg.litdata, "kind", "paired", "name", "augloader/shm/nodesam/pyg-batch")
	theirs, ok2 := rowWith(pg.litdata, "kind", "paired", "name", fast["name"])
	if ok1 && ok2 {
		oursCPU := num(ours, "trainer_cpu_s") + num(ours, "daemon_cpu_s")
		fmt.Fprintf(w, "\nPaired, epoch by epoch in turn (%s each, medians): `AugloaderDataset(pyg=True)` over shared memory with the daemon "+
			"serving NodeSam, %s s (trainer CPU %s s, daemon %s s), against LitData's fastest (`%s`) doing only `dropout_edge`, "+
			"%s s (CPU %s s): **%s the wall time, %s the CPU** (ours trainer and daemon together).\n",
			ours["epochs"], fs(num(ours, "wall_s")), fs(num(ours, "trainer_cpu_s")), fs(num(ours, "daemon_cpu_s")), fast["name"],
			fs(num(theirs, "wall_s")), fs(num(theirs, "loader_cpu_s")), fx(num(theirs, "wall_s")/num(ours, "wall_s")),
			fx(num(theirs, "loader_cpu_s")/oursCPU))
	}
	w.WriteString("\nWhat each loader does with the same situations (each a check the step runs and prints; docs/compare.md's " +
		"feature table quotes them):\n\n| check | holds | what it compared |\n|---|---|---|\n")
	for _, m := range pg.litdata {
		if m["kind"] != "check" {
			continue
		}
		var keys []string
		for k := range m {
			if k != "kind" && k != "name" && k != "holds" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		var what []string
		for _, k := range keys {
			v, err := url.QueryUnescape(m[k])
			if err != nil {
				v = m[k]
			}
			what = append(what, fmt.Sprintf("%s: %s", k, strings.ReplaceAll(v, "|", "\\|")))
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", m["name"], m["holds"], strings.Join(what, "; "))
	}
	w.WriteString("\n")
}
