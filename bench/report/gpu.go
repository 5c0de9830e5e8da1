package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// GPU rows come from a lent device machine, not from make bench's run:
// bench/python_gpu.py's and bench/python_gpu_feed.py's outputs are kept
// under bench/results/ with their provenance (commit, machine, versions,
// date) in '#' lines, and this page quotes them as such.

// gpuResults is one saved results file: its RESULT lines and its
// provenance lines.
type gpuResults struct {
	file  string
	rows  []map[string]string
	about []string
}

// readResultsDir reads every saved results file of dir (*.txt), by name
// without the extension; a missing dir is none.
func readResultsDir(dir string) (map[string]*gpuResults, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	out := map[string]*gpuResults{}
	for _, p := range paths {
		r, err := readResultsFile(p)
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(filepath.Base(p), ".txt")] = r
	}
	return out, nil
}

// readResultsFile reads a saved results file; a missing one is nil.
func readResultsFile(path string) (*gpuResults, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := readResultLines(path)
	if err != nil {
		return nil, err
	}
	r := &gpuResults{file: filepath.ToSlash(filepath.Join("bench/results", filepath.Base(path))), rows: rows}
	for line := range strings.SplitSeq(string(b), "\n") {
		if about, ok := strings.CutPrefix(line, "# "); ok {
			r.about = append(r.about, about)
		}
	}
	return r, nil
}

func (pg *page) gpuLoopCases() ([]any, []measuredCase) {
	if pg.gpu == nil {
		return nil, nil
	}
	var cs []measuredCase
	for _, m := range pg.gpu.rows {
		if m["kind"] == "loop" && m["feed"] == "augloader" {
			c := loopCase("batch "+m["bs"]+", "+m["layout"], m)
			c.shown += fmt.Sprintf(", the epoch %.2f× the resident one", num(m, "fed_s")/num(m, "resident_s"))
			cs = append(cs, c)
		}
	}
	return []any{pg.gpuMachine() + ", `bench/python_gpu.py`"}, cs
}

// gpuMachine names the GPU the results came from.
func (pg *page) gpuMachine() string {
	if d, ok := rowWith(pg.gpu.rows, "kind", "device"); ok {
		return strings.ReplaceAll(d["name"], "_", " ") + ", torch " + d["torch"]
	}
	return "a lent GPU"
}

// writeGPU: the trainer's side on a GPU (bench/results/gpu*.txt).
func (pg *page) writeGPU(w *bytes.Buffer) {
	fmt.Fprintf(w, "## The trainer's side on a GPU (`bench/python_gpu.py`)\n\n")
	if pg.gpu == nil {
		w.WriteString("No GPU results are saved (bench/results/gpu.txt is missing): run bench/python_gpu.py on a GPU machine.\n\n")
		return
	}
	fmt.Fprintf(w, "Not part of `make bench` (this machine has no GPU): the figures are `%s`, saved from a lent device machine. %s\n\n",
		pg.gpu.file, strings.Join(pg.gpu.about, " "))
	fmt.Fprintf(w, "A NodeSam epoch of the real COLLAB into CUDA tensors: ours through `to_tensors(b, \"cuda\")` (the int32 arrays cross "+
		"the bus and are widened, the one-hot `x` built, on the GPU), PyG's `DataLoader` applying `dropout_edge(p=0.2)` per graph "+
		"with each batch moved by `.to(\"cuda\")` (workers pinning their batches), in every configuration listed, the fastest "+
		"taken; wall s (the last copy synchronised) and the trainer process's CPU s, median of 5 epochs after a first. "+
		"The daemon ran on the same machine's 16 cores.\n\n")
	fmt.Fprintf(w, "| batch | layout | ours over socket s | ours over shm s | PyG fastest s | PyG ÷ ours (shm) | trainer CPU: ours (shm) vs PyG s |\n|---:|---|---:|---:|---:|---:|---:|\n")
	for _, m := range pg.gpu.rows {
		if m["kind"] != "fastest" {
			continue
		}
		sock, _ := rowWith(pg.gpu.rows, "kind", "tensors", "bs", m["bs"], "name", "augloader/socket/"+m["layout"])
		shm, _ := rowWith(pg.gpu.rows, "kind", "tensors", "bs", m["bs"], "name", "augloader/shm/"+m["layout"])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s (%s) | %.1f× | %s vs %s |\n", m["bs"], m["layout"], fs(num(sock, "wall_s")), fs(num(shm, "wall_s")),
			fs(num(m, "wall_s")), strings.TrimPrefix(m["name"], "pyg/"+m["layout"]+"/"), num(m, "wall_s")/num(shm, "wall_s"),
			fs(num(shm, "cpu_s")), fs(num(m, "cpu_s")))
	}
	fmt.Fprintf(w, "\nEvery PyG configuration:\n\n| batch | configuration | wall s | trainer CPU s |\n|---:|---|---:|---:|\n")
	for _, m := range pg.gpu.rows {
		if m["kind"] == "tensors" && strings.HasPrefix(m["name"], "pyg/") {
			fmt.Fprintf(w, "| %s | `%s` | %s | %s |\n", m["bs"], m["name"], fs(num(m, "wall_s")), fs(num(m, "cpu_s")))
		}
	}
	fmt.Fprintf(w, "\nA GIN-0 training loop on the GPU (5 layers, hidden 64, Adam; `examples/train_gin.py`'s model), each step reading its loss "+
		"back (`loss.item()`), whole epochs over shared memory, median of 3 after a first: *resident* has every batch already on "+
		"the GPU (the floor), *Prefetcher* is fed by `augloader.torch.Prefetcher` (a thread receiving and copying ahead), *wait* "+
		"the time the loop spent waiting for a batch; the PyG row is the same loop fed by PyG's fastest `DataLoader` above.\n\n")
	fmt.Fprintf(w, "| batch | layout | feed | batches | resident s | epoch s | ÷ resident | wait s | wait ÷ epoch |\n|---:|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range pg.gpu.rows {
		if m["kind"] != "loop" {
			continue
		}
		res, feed, batches := num(m, "resident_s"), "`Prefetcher`", m["batches"]
		if m["feed"] != "augloader" {
			r, _ := rowWith(pg.gpu.rows, "kind", "loop", "bs", m["bs"], "feed", "augloader", "layout", m["layout"])
			res, feed, batches = num(r, "resident_s"), "PyG `"+strings.TrimPrefix(m["feed"], "pyg/pyg/")+"`", r["batches"]
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %.2f× | %s | %.1f%% |\n", m["bs"], m["layout"], feed, batches, fs(res), fs(num(m, "fed_s")),
			num(m, "fed_s")/res, fs(num(m, "wait_s")), 100*num(m, "wait_s")/num(m, "fed_s"))
	}
	w.WriteString("\n")
	if pg.gpuFeed != nil {
		fmt.Fprintf(w, "Five ways to feed the same loop. The step of so small a model is bound by Python launching its kernels, "+
			"so a thread making the next batch competes with it for the interpreter. From `%s`: %s\n\n", pg.gpuFeed.file, strings.Join(pg.gpuFeed.about, " "))
		fmt.Fprintf(w, "| batch | loss read back | feed | epoch s | ÷ resident |\n|---:|---|---|---:|---:|\n")
		for _, m := range pg.gpuFeed.rows {
			if m["kind"] != "feed" {
				continue
			}
			r, _ := rowWith(pg.gpuFeed.rows, "kind", "feed", "sync", m["sync"], "bs", m["bs"], "name", "resident")
			fmt.Fprintf(w, "| %s | %s | `%s` | %s | %.2f× |\n", m["bs"], map[string]string{"item": "each step", "none": "never"}[m["sync"]],
				m["name"], fs(num(m, "wall_s")), num(m, "wall_s")/num(r, "wall_s"))
		}
		w.WriteString("\n")
	}
	for _, g := range pg.goalsOf("#28") {
		if strings.Contains(g.what, "GPU") && !strings.Contains(g.what, "GPU machine") {
			fmt.Fprintf(w, "- %s: %s (%s).\n", g.what, g.measured, verdict(g))
		}
	}
	w.WriteString("\n")
}
