package main

import (
	"bytes"
	"fmt"
	"strings"
)

// tensorCases are #28's cases for one layout: the epoch to torch tensors
// over each transport against PyG's fastest configuration in the same
// layout (wall: PyG's ÷ ours; cpu: PyG's trainer CPU ÷ ours).
func tensorCases(layout string) func(*page) ([]any, []measuredCase) {
	return func(pg *page) ([]any, []measuredCase) {
		peer, ok := rowWith(pg.tensors, "kind", "fastest", "layout", layout)
		if !ok {
			return nil, nil
		}
		var cs []measuredCase
		for _, t := range []string{"socket", "shm"} {
			// The epochs alternated with the peer's, where the run has them.
			ours, ok := rowWith(pg.tensors, "kind", "tensors", "name", "paired/augloader/"+t+"/"+layout)
			if !ok {
				ours, ok = rowWith(pg.tensors, "kind", "tensors", "name", "augloader/"+t+"/"+layout)
			}
			if !ok {
				cs = append(cs, measuredCase{shown: t + ": not measured"})
				continue
			}
			w, c := num(peer, "wall_s")/num(ours, "wall_s"), num(peer, "cpu_s")/num(ours, "cpu_s")
			cs = append(cs, measuredCase{fmt.Sprintf("%s: %.1f× the wall time, 1/%.0f of the CPU (%s vs %s s; %s vs %s s CPU)",
				t, w, c, fs(num(ours, "wall_s")), fs(num(peer, "wall_s")), fs(num(ours, "cpu_s")), fs(num(peer, "cpu_s"))),
				map[string]float64{"wall": w, "cpu": c}})
		}
		return []any{strings.TrimPrefix(peer["name"], "pyg/"+layout+"/")}, cs
	}
}

// tensorsShmCase: tensorCases("pyg")'s shared-memory case alone (#68's
// bound on it), the peer's PyG named.
func (pg *page) tensorsShmCase() ([]any, []measuredCase) {
	args, cs := tensorCases("pyg")(pg)
	for _, c := range cs {
		if strings.HasPrefix(c.shown, "shm:") && c.figures != nil {
			return append([]any{pg.pygPeer()}, args...), []measuredCase{c}
		}
	}
	return nil, nil
}

func (pg *page) clientCases() ([]any, []measuredCase) {
	var cs []measuredCase
	for _, v := range []string{"socket/no-digest", "socket/digest"} {
		g, ok1 := rowWith(pg.tensors, "kind", "client", "name", "go/"+v)
		p, ok2 := rowWith(pg.tensors, "kind", "client", "name", "python/"+v)
		if !ok1 || !ok2 {
			continue
		}
		r := num(g, "wall_s") / num(p, "wall_s")
		cs = append(cs, measuredCase{fmt.Sprintf("%s: %.2f× (%s vs %s s)", v, r, fs(num(g, "wall_s")), fs(num(p, "wall_s"))),
			map[string]float64{"ratio": r}})
	}
	return nil, cs
}

// loopCase is one training loop's wait as a share of its epoch.
func loopCase(label string, m map[string]string) measuredCase {
	frac := num(m, "wait_s") / num(m, "fed_s")
	return measuredCase{fmt.Sprintf("%s: %.1f%% (%s s of %s s; resident %s s)", label, 100*frac, fs(num(m, "wait_s")), fs(num(m, "fed_s")),
		fs(num(m, "resident_s"))), map[string]float64{"wait": frac}}
}

func (pg *page) cpuLoopCases() ([]any, []measuredCase) {
	var cs []measuredCase
	for _, l := range []string{"pyg", "codes"} {
		if m, ok := rowWith(pg.tensors, "kind", "loop", "layout", l); ok {
			cs = append(cs, loopCase(l, m))
		}
	}
	return nil, cs
}

// bufferMode says how the run's torch reused the dense x's buffers, as
// bench/python_tensors.py recorded it (the page once claimed a storage
// use count the bench venv's torch 1.13 does not have).
func (pg *page) bufferMode() string {
	m, ok := rowWith(pg.tensors, "kind", "buffers")
	if !ok {
		return "built in reused buffers; the run did not record how"
	}
	if m["mode"] == "use-count" {
		return "built in reused buffers, each taken again once torch " + m["torch"] + "'s storage use count says nothing refers to it"
	}
	return "built in reused buffers: torch " + m["torch"] + " has no storage use count, so NumPy buffers are taken again once their reference count says nothing refers to them"
}

// writeTensors: the trainer's cost per batch (step tensors).
func (pg *page) writeTensors(w *bytes.Buffer) {
	if !section(w, "The trainer's cost per batch (`bench/python_tensors.py`)", "tensors.txt", pg.tensors) {
		return
	}
	fmt.Fprintf(w, "Command: %s (step `tensors`). A NodeSam epoch of the real COLLAB (5,000 graphs, batches of 32) turned into "+
		"torch tensors on the CPU device by `augloader.torch.to_tensors`, the daemon on the same machine as `augloader.Daemon` starts it "+
		"(its runtime on every core but the trainer's: `--procs`); against "+
		"%s's `DataLoader` applying `dropout_edge(p=0.2)` per graph, in every configuration of workers and persistence, "+
		"the fastest by wall time taken as the peer; the comparison (`paired/…` rows, the goals) then alternates epochs one by one: ours over "+
		"the socket, ours over shared memory, PyG's fastest, and again. Per epoch (median of 5): wall time, and CPU time (user + system): ours the trainer "+
		"process's own, PyG's its process's and its DataLoader workers' (`bench/peers/cpuclock.py`). Layout `pyg`: PyG's `Batch` fields, "+
		"the dense one-hot `x` [N, 369] float32 (%s) "+
		"and int64 `edge_index`; layout `codes`: no dense `x`, the int32 codes, nodes and "+
		"weights (`CodeEmbedding` takes them) against PyG holding the int64 degree code as `x`. "+
		"`…/loader-workers=W`: the same epochs through `AugloaderDataset` in torch's `DataLoader(batch_size=None)`, "+
		"W = 0 in the trainer, W = 2 persistent workers making the tensors (the dense `x` in a fresh array each batch: a worker "+
		"never reuses a buffer the trainer reads from shared memory) and the trainer receiving them. This machine has no GPU: "+
		"the next section's figures come from a lent one. %s\n\n", pg.command("tensors"), pg.pygPeer(), pg.bufferMode(), pg.machineLine())
	fmt.Fprintf(w, "| configuration | wall s/epoch | trainer CPU s/epoch |\n|---|---:|---:|\n")
	for _, m := range pg.tensors {
		if m["kind"] == "tensors" {
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", m["name"], fs(num(m, "wall_s")), fs(num(m, "cpu_s")))
		}
	}
	fmt.Fprintf(w, "\n")
	if _, ok := rowWith(pg.tensors, "kind", "client"); ok {
		fmt.Fprintf(w, "The Go client (`augloader fetch`, the seconds it reports) and the Python client (iterating the stream, "+
			"no tensors) reading the same daemon's NodeSam epochs in turn (median of 5): without digests, and with them "+
			"(SHA-256 of the stream and of each batch; `fetch` computes both unless `--no-digest`, Python with `digest=True`). "+
			"The Go client's shm ring is made anew per process (`fetch` reads one epoch); the Python client reuses its ring.\n\n")
		fmt.Fprintf(w, "| client read | s/epoch | ÷ Python's |\n|---|---:|---:|\n")
		for _, m := range pg.tensors {
			if m["kind"] != "client" {
				continue
			}
			ratio := "—"
			if strings.HasPrefix(m["name"], "go/") {
				if p, ok := rowWith(pg.tensors, "kind", "client", "name", "python/"+strings.TrimPrefix(m["name"], "go/")); ok {
					ratio = fmt.Sprintf("%.2f×", num(m, "wall_s")/num(p, "wall_s"))
				}
			}
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", m["name"], fs(num(m, "wall_s")), ratio)
		}
		fmt.Fprintf(w, "\n")
	}
	if _, ok := rowWith(pg.tensors, "kind", "loop"); ok {
		fmt.Fprintf(w, "A training loop on the CPU device (GIN-0, 5 layers, hidden 64, Adam; `examples/train_gin.py`'s model, the "+
			"codes layout through `CodeEmbedding`), the first batches of each epoch over shared memory, median of 3 epochs after "+
			"a first: *resident* has every batch's tensors made before the clock starts (the floor: compute alone), *prefetched* "+
			"takes them from `Prefetcher` (received and made on a thread beside the loop); *wait* is the time the loop spent "+
			"waiting for a batch (`Prefetcher.wait_s`).\n\n")
		fmt.Fprintf(w, "| layout | batches | resident s | prefetched s | wait s | wait ÷ epoch |\n|---|---:|---:|---:|---:|---:|\n")
		for _, m := range pg.tensors {
			if m["kind"] == "loop" {
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.1f%% |\n", m["layout"], m["batches"], fs(num(m, "resident_s")),
					fs(num(m, "fed_s")), fs(num(m, "wait_s")), 100*num(m, "wait_s")/num(m, "fed_s"))
			}
		}
		fmt.Fprintf(w, "\n")
	}
	for _, g := range pg.goalsOf("#28") {
		if strings.Contains(g.what, "on a GPU") { // the GPU section's
			continue
		}
		fmt.Fprintf(w, "- %s: %s (%s).\n", g.what, g.measured, verdict(g))
	}
	fmt.Fprintf(w, "\n")
}
