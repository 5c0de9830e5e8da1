package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Named figures: every number another page may quote, under a name that
// says where it came from, written beside the page as docs/figures.tsv.
// A page marks each figure it quotes with <!--fig:NAME--> right after it,
// and internal/testkit/docstest checks the figure against this file, by
// name (a figure that merely occurred somewhere on the bench page passed
// before).
//
//	SOURCE:ROW:FIELD   a RESULT field of a step's output (ROW: the row's
//	                   identifying fields, sorted, k=v joined by ",")
//	goal:KEY:CASE:FIG  a figure a goal was judged on (CASE: the case's
//	                   label, "" for a goal of one case)
//	gobench:NAME:UNIT  a Go benchmark's median
//	python:NAME:FIELD  a Python client benchmark row (median_s, best_s)
//	convert:FIELD      the real COLLAB's conversion
//	NAME:ROW:FIELD     a RESULT field of bench/results/NAME.txt (saved
//	                   from runs make bench does not make: a lent GPU's,
//	                   the long resume-model run)

// measureField reports whether a RESULT field is a measurement (else it
// identifies its row).
func measureField(k string) bool {
	for _, suf := range []string{"_s", "_kib", "_bytes", "_per_s", "_mbs", "_mib"} {
		if strings.HasSuffix(k, suf) {
			return true
		}
	}
	return k == "tv" || k == "ratio"
}

// countField is a field that neither measures nor identifies a row
// (how many epochs or graphs it ran, or epochs alternated with a peer).
func countField(k string) bool {
	return k == "epochs" || k == "graphs" || k == "batches" || k == "paired"
}

func addRows(out map[string]float64, source string, rows []map[string]string) {
	for _, m := range rows {
		var id []string
		fastest := m["kind"] == "fastest"
		for _, k := range slices.Sorted(maps.Keys(m)) {
			// A fastest row is named by what it compares, not by the
			// configuration that won this run (the next run's may differ),
			// and by the dataset its name leads with, if any.
			if fastest && (k == "name" || k == "ours") {
				if set, _, ok := strings.Cut(m[k], "/"); ok && k == "name" && set == strings.ToUpper(set) && strings.ContainsAny(set, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
					id = append(id, "set="+set)
				}
				continue
			}
			if !measureField(k) && !countField(k) {
				id = append(id, k+"="+m[k])
			}
		}
		slices.Sort(id)
		row := strings.Join(id, ",")
		for k, v := range m {
			if x, err := strconv.ParseFloat(v, 64); err == nil && measureField(k) {
				out[source+":"+row+":"+k] = x
			}
		}
	}
}

// caseLabel is a case's name within its goal: its shown text up to the
// first colon ("shm: 7.8× …" is "shm"), "" when the goal has one case.
func caseLabel(c measuredCase, n int) string {
	if n == 1 {
		return ""
	}
	label, _, _ := strings.Cut(c.shown, ":")
	return label
}

// figures is every named figure of the run.
func (pg *page) figures() map[string]float64 {
	out := map[string]float64{}
	for _, s := range []struct {
		name string
		rows []map[string]string
	}{{"tensors", pg.tensors}, {"twins", pg.twins}, {"molecules", pg.molecules}, {"large", pg.large},
		{"shuffle", pg.shuffle}, {"scaleout", pg.scaleout}, {"litdata", pg.litdata}} {
		addRows(out, s.name, s.rows)
	}
	for name, r := range pg.results { // bench/results: gpu, gpu-feed, resume-model, …
		addRows(out, name, r.rows)
	}
	if pg.results == nil { // a page built without the folder (tests)
		for name, r := range map[string]*gpuResults{"gpu": pg.gpu, "gpu-feed": pg.gpuFeed} {
			if r != nil {
				addRows(out, name, r.rows)
			}
		}
	}
	for k, v := range pg.convert {
		out["convert:"+k] = v
	}
	if pg.py != nil {
		for _, r := range pg.py.rows {
			name := r.Name
			if r.Config != "" && r.Epochs == 0 { // a "…/fastest" marker: its configuration's figures
				if c, ok := pg.py.get(r.Config); ok {
					r = c
				}
			}
			if r.Epochs > 0 {
				out["python:"+name+":median_s"] = r.Median
				out["python:"+name+":best_s"] = r.Best
				out["python:"+name+":graphs_per_s"] = r.Graphs / r.Median
			}
		}
	}
	for _, b := range []*benchFile{pg.policies, pg.scaling, pg.collate, pg.epoch} {
		if b == nil {
			continue
		}
		for _, n := range b.names {
			for unit := range b.metrics[n] {
				out["gobench:"+n+":"+unit] = b.med(n, unit)
			}
		}
	}
	for _, g := range pg.goals() {
		for _, c := range g.cases {
			for f, v := range c.figures {
				out["goal:"+g.key+":"+caseLabel(c, len(g.cases))+":"+f] = v
			}
		}
	}
	return out
}

// figuresTSV is the figures as docs/figures.tsv holds them: name, tab,
// value (%.6g), sorted by name.
func (pg *page) figuresTSV() []byte {
	figs := pg.figures()
	var b strings.Builder
	b.WriteString("# Written by `make bench` (bench/report) with docs/bench.md: every figure a page may quote, by name.\n")
	for _, k := range slices.Sorted(maps.Keys(figs)) {
		fmt.Fprintf(&b, "%s\t%.6g\n", k, figs[k])
	}
	return []byte(b.String())
}
