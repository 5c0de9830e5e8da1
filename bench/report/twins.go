package main

import (
	"bytes"
	"fmt"
	"strings"
)

// twinCases are #38's cases: COLLAB in each layout over each transport
// against GraphCL's augmentations at their fastest.
func (pg *page) twinCases() ([]any, []measuredCase) {
	var cs []measuredCase
	for _, layout := range []string{"pyg", "codes"} {
		for _, t := range []string{"socket", "shm"} {
			m, ok := rowWith(pg.twins, "kind", "fastest", "layout", layout, "transport", t)
			if !ok || strings.HasPrefix(m["name"], "REDDIT-BINARY/") { // COLLAB's rows come first
				continue
			}
			r := num(m, "wall_s") / num(m, "ours_wall_s")
			cs = append(cs, measuredCase{fmt.Sprintf("%s layout over %s: %.1f× (%s vs %s s; CPU %s vs %s s)", layout, t, r,
				fs(num(m, "ours_wall_s")), fs(num(m, "wall_s")), fs(num(m, "ours_cpu_s")), fs(num(m, "cpu_s"))),
				map[string]float64{"speedup": r}})
		}
	}
	peer, _ := rowWith(pg.twins, "kind", "fastest", "layout", "pyg")
	return []any{strings.TrimPrefix(peer["name"], "pyg/")}, cs
}

// writeTwins: two views a graph (step twins).
func (pg *page) writeTwins(w *bytes.Buffer) {
	if !section(w, "Two views of every graph (`bench/python_twins.py`)", "twins.txt", pg.twins) {
		return
	}
	fmt.Fprintf(w, "Command: %s (step `twins`). GraphCL's contrastive pre-training needs two augmented copies of every graph "+
		"(docs/contrastive.md, twins). One epoch of the real COLLAB (5,000 graphs) and REDDIT-BINARY (2,000) with the pair node "+
		"dropping 10%% / a subgraph of 20%% of the nodes, into a pair of PyG `Batch`es per batch: augloader's "+
		"`AugloaderDataset(twins=2, pyg=True)` from a daemon declaring `--twins 'dropnode:ratio=0.1 / subgraph:ratio=0.2'` "+
		"(the daemon on the same machine as `augloader.Daemon` starts it: its runtime on every core but the trainer's), against a PyG `DataLoader` over a `Dataset` whose `get` makes both views "+
		"of the graph per call, GraphCL's augmentations written clean-room with `torch_geometric.utils` and NumPy "+
		"(`bench/peers/graphcl.py`), in every configuration of workers, persistence and batch size (32, 128; REDDIT-BINARY 128 "+
		"only), the fastest by wall time taken as the peer; ours at that batch size, the comparison with it from epochs alternated "+
		"one by one (ours over the socket, ours over shared memory, PyG's fastest, and again). Layout `pyg`: `x` the dense one-hot degree "+
		"on both sides; `codes`: augloader's int32 codes (`CodeEmbedding`), PyG's `x` the int64 degree code. Per epoch (median): "+
		"wall time and CPU: ours the trainer process's (`getrusage`; the daemon is another process), PyG's its process's and its "+
		"DataLoader workers' (`bench/peers/cpuclock.py`). %s\n\n",
		pg.command("twins"), pg.machineLine())
	fmt.Fprintf(w, "| configuration | batch | wall s/epoch | CPU s/epoch |\n|---|---:|---:|---:|\n")
	for _, m := range pg.twins {
		if m["kind"] == "ours" || m["kind"] == "peer" {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", m["name"], m["bs"], fs(num(m, "wall_s")), fs(num(m, "cpu_s")))
		}
	}
	fmt.Fprintf(w, "\n")
	for _, m := range pg.twins {
		if m["kind"] == "fastest" {
			alt := ""
			if m["paired"] != "" {
				alt = fmt.Sprintf(", %s alternating epochs", m["paired"])
			}
			fmt.Fprintf(w, "- `%s` against PyG at its fastest (`%s`%s): %.1f× the wall time, %.2f× the CPU (PyG's ÷ ours).\n",
				m["ours"], m["name"], alt, num(m, "wall_s")/num(m, "ours_wall_s"), num(m, "cpu_s")/num(m, "ours_cpu_s"))
		}
	}
	for _, g := range pg.goalsOf("#38") {
		fmt.Fprintf(w, "- %s: %s (%s).\n", g.what, g.measured, verdict(g))
	}
	fmt.Fprintf(w, "\n")
}
