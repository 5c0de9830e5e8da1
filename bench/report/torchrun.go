package main

import (
	"bytes"
	"fmt"
	"strings"
)

// writeTorchrun: what torchrun's worker group costs (issue #56), from
// bench/python_torchrun.py's output saved as bench/results/torchrun.txt
// (it needs a torch whose torchrun works, so make bench does not run it).
func (pg *page) writeTorchrun(w *bytes.Buffer) {
	r := pg.results["torchrun"]
	fmt.Fprintf(w, "## Under torchrun (`bench/python_torchrun.py`)\n\n")
	if r == nil || len(r.rows) == 0 {
		w.WriteString("No results are saved (bench/results/torchrun.txt is missing): run bench/python_torchrun.py in .venv-torch2.\n\n")
		return
	}
	fmt.Fprintf(w, "From `%s`: %s\n\n", r.file, strings.Join(r.about, " "))
	fmt.Fprintf(w, "Real torchrun agents on this machine, each a \"node\" of 2 workers with its own node daemon, training "+
		"`examples/train_gin.py` (batch 16 per rank, a checkpoint every 4 steps). *start*: from starting the agents to the "+
		"first batch trained on every rank. *restart*: two nodes training at world 4, one lost (agent, workers and daemon "+
		"SIGKILLed) mid-epoch; from the kill to the first batch trained on every rank of the restarted group at world 2. "+
		"Median of the runs, their range beside it.\n\n")
	fmt.Fprintf(w, "| case | nodes × workers | ranks | median s | range s | runs |\n|---|---|---:|---:|---:|---:|\n")
	for _, m := range r.rows {
		if m["kind"] != "torchrun" {
			continue
		}
		ranks := m["ranks"]
		fmt.Fprintf(w, "| %s | %s × %s | %s | %s | %s–%s | %s |\n", m["case"], m["nodes"], m["procs"], ranks,
			fs(num(m, "first_batch_s")), fs(num(m, "min_s")), fs(num(m, "max_s")), m["runs"])
	}
	w.WriteString("\n")
}
