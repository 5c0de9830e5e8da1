package main

import (
	"bytes"
	"fmt"
	"strings"
)

// writeBeside: the cliff and object-storage rows measured again with an
// older build beside the current one in one run (bench/beside.sh OLD,
// saved as bench/results/beside.txt): a fix that adds a check per page
// must not show as a slower row. Medians of each build's runs, and the
// ratio new ÷ old.
func (pg *page) writeBeside(w *bytes.Buffer) {
	r := pg.results["beside"]
	if r == nil || len(r.rows) == 0 {
		return
	}
	fmt.Fprintf(w, "### The cliff and object-storage rows beside an older build (`bench/beside.sh`)\n\n")
	// The file's provenance and its notes (the lines that say more than
	// which step and build follow).
	var about []string
	for i, a := range r.about {
		if i == 0 || len(a) > 60 {
			about = append(about, strings.TrimRight(a, ":.")+".")
		}
	}
	fmt.Fprintf(w, "From bench/results/beside.txt: %s Medians of each build's runs (their count in brackets).\n\n", strings.Join(about, " "))
	type key struct{ step, run string }
	epochs := map[key]map[string][]float64{}
	gets := map[key]map[string]float64{}
	var order []key
	for _, m := range r.rows {
		k := key{"cliff", m["run"]}
		switch {
		case m["round"] != "":
			k = key{"s3, alternating", m["name"]}
		case m["kind"] == "s3":
			k = key{"s3", m["name"]}
		}
		if epochs[k] == nil {
			epochs[k], gets[k] = map[string][]float64{}, map[string]float64{}
			order = append(order, k)
		}
		epochs[k][m["build"]] = append(epochs[k][m["build"]], num(m, "epoch_s"))
		if g, ok := m["gets"]; ok && g != "" {
			gets[k][m["build"]] = num(m, "gets")
		}
	}
	fmt.Fprintf(w, "| step | run | old epoch s | new epoch s | new ÷ old | GETs old, new |\n|---|---|---:|---:|---:|---:|\n")
	for _, k := range order {
		o, n := median(epochs[k]["old"]), median(epochs[k]["new"])
		g := ""
		if len(gets[k]) == 2 {
			g = fmt.Sprintf("%s, %s", fnum(gets[k]["old"]), fnum(gets[k]["new"]))
		}
		fmt.Fprintf(w, "| %s | %s | %s (%d) | %s (%d) | %.2f | %s |\n", k.step, k.run, fs(o), len(epochs[k]["old"]), fs(n),
			len(epochs[k]["new"]), n/o, g)
	}
	fmt.Fprintf(w, "\n")
}
