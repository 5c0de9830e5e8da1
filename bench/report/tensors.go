package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// tensorGoals are issue #28's rows of the goals table: each layout's
// epoch to torch tensors against PyG's fastest configuration in the same
// layout, wall time and the trainer process's CPU, on both transports.
func (pg *page) tensorGoals() []goal {
	var gs []goal
	for _, l := range []struct {
		layout, what    string
		wallGoal, cpuGo float64
	}{
		{"pyg", "PyG's layout (dense one-hot x)", 6, 10},
		{"codes", "the compact layout (feature codes), PyG given the same codes", 10, 20},
	} {
		peer, ok := rowWith(pg.tensors, "kind", "fastest", "layout", l.layout)
		if !ok {
			continue
		}
		var parts []string
		met, measured := true, true
		for _, t := range []string{"socket", "shm"} {
			ours, ok := rowWith(pg.tensors, "kind", "tensors", "name", "augloader/"+t+"/"+l.layout)
			if !ok {
				measured = false
				continue
			}
			w := num(peer, "wall_s") / num(ours, "wall_s")
			c := num(peer, "cpu_s") / num(ours, "cpu_s")
			met = met && w >= l.wallGoal && c >= l.cpuGo
			measured = measured && !math.IsNaN(w) && !math.IsNaN(c)
			parts = append(parts, fmt.Sprintf("%s: %.1f× the wall time, 1/%.0f of the CPU (%s vs %s s; %s vs %s s CPU)",
				t, w, c, fs(num(ours, "wall_s")), fs(num(peer, "wall_s")), fs(num(ours, "cpu_s")), fs(num(peer, "cpu_s"))))
		}
		gs = append(gs, goal{"#28", fmt.Sprintf("a NodeSam COLLAB epoch to torch tensors on the CPU through `to_tensors`, %s: ≥ %.0f× PyG's wall time and ≤ 1/%.0f of its trainer-process CPU, PyG at its fastest (%s)",
			l.what, l.wallGoal, l.cpuGo, strings.TrimPrefix(peer["name"], "pyg/"+l.layout+"/")),
			strings.Join(parts, "; "), met, measured, false})
	}
	return gs
}

// writeTensors: the trainer's cost per batch (step tensors).
func (pg *page) writeTensors(w *bytes.Buffer) {
	fmt.Fprintf(w, "## The trainer's cost per batch (`bench/python_tensors.py`)\n\n")
	if pg.tensors == nil {
		fmt.Fprintf(w, "Not measured in this run (tensors.txt missing).\n\n")
		return
	}
	fmt.Fprintf(w, "Command: %s (step `tensors`). A NodeSam epoch of the real COLLAB (5,000 graphs, batches of 32) turned into "+
		"torch tensors on the CPU device by `augloader.torch.to_tensors`, the daemon (every core) on the same machine; against "+
		"PyG 2.5.3's `DataLoader` applying `dropout_edge(p=0.2)` per graph, in every configuration of workers and persistence, "+
		"the fastest by wall time taken as the peer. Per epoch (median of 5): wall time, and the CPU time of the trainer process "+
		"itself (`getrusage`, user + system; DataLoader workers are other processes). Layout `pyg`: PyG's `Batch` fields, "+
		"the dense one-hot `x` [N, 369] float32 and int64 `edge_index`; layout `codes`: no dense `x`, the int32 codes, nodes and "+
		"weights (`CodeEmbedding` takes them) against PyG holding the int64 degree code as `x`. No GPU was measured here "+
		"(no device machine was lent to this run). %s\n\n", pg.command("tensors"), pg.machineLine())
	fmt.Fprintf(w, "| configuration | wall s/epoch | trainer CPU s/epoch |\n|---|---:|---:|\n")
	for _, m := range pg.tensors {
		if m["kind"] == "tensors" {
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", m["name"], fs(num(m, "wall_s")), fs(num(m, "cpu_s")))
		}
	}
	fmt.Fprintf(w, "\n")
	for _, g := range pg.tensorGoals() {
		fmt.Fprintf(w, "- %s: %s (%s).\n", g.what, g.measured, verdict(g))
	}
	fmt.Fprintf(w, "\n")
}
