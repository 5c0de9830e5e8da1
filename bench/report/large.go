package main

import (
	"bytes"
	"fmt"
	"slices"
)

// largeRows returns the large step's rows of kind.
func (pg *page) largeRows(kind string) []map[string]string {
	var out []map[string]string
	for _, m := range pg.large {
		if m["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}

// largeStart is the median time to the first batch of each set size.
func (pg *page) largeStart() (sizes []float64, medians []float64) {
	by := map[float64][]float64{}
	for _, m := range pg.largeRows("start") {
		by[num(m, "size")] = append(by[num(m, "size")], num(m, "first_batch_s"))
	}
	for s := range by {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	for _, s := range sizes {
		v := by[s]
		slices.Sort(v)
		medians = append(medians, v[len(v)/2])
	}
	return sizes, medians
}

func (pg *page) largeThroughputCase() ([]any, []measuredCase) {
	lim, ok1 := rowWith(pg.large, "kind", "serve", "name", "limited")
	cached, ok2 := rowWith(pg.large, "kind", "serve", "name", "cached")
	if !ok1 || !ok2 {
		return nil, nil
	}
	r := num(lim, "graphs_per_s") / num(cached, "graphs_per_s")
	c := pg.largestConvert()
	return []any{fnum(num(lim, "graphs")), mb(num(c, "input_bytes")), mb(num(c, "shard_bytes")), pg.largeDecoded, lim["shuffle"]},
		one(fmt.Sprintf("%.0f%% (%s vs %s graphs/s); peak RSS %.0f MiB, cgroup peak %.0f MiB", 100*r, fnum(num(lim, "graphs_per_s")),
			fnum(num(cached, "graphs_per_s")), num(lim, "rss_kib")/1024, num(lim, "cgroup_peak_bytes")/(1<<20)),
			map[string]float64{"ratio": r})
}

func (pg *page) largeStartCase() ([]any, []measuredCase) {
	sizes, med := pg.largeStart()
	if len(sizes) != 2 {
		return nil, nil
	}
	r := med[1] / med[0]
	return []any{fnum(sizes[0]), fnum(sizes[1])},
		one(fmt.Sprintf("%s vs %s s (medians of 3): %.2f×", fs(med[0]), fs(med[1]), r), map[string]float64{"ratio": r})
}

// largestConvert is the larger set's conversion row.
func (pg *page) largestConvert() map[string]string {
	best := map[string]string{}
	for _, m := range pg.largeRows("convert") {
		if num(m, "graphs") > num(best, "graphs") || len(best) == 0 {
			best = m
		}
	}
	return best
}

func mb(bytes float64) string {
	if bytes >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", bytes/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", bytes/(1<<20))
}

// writeLarge: datasets larger than memory (step large).
func (pg *page) writeLarge(w *bytes.Buffer) {
	if !section(w, "Larger than memory (`bench/large.sh`)", "large.txt", pg.large) {
		return
	}
	fmt.Fprintf(w, "Command: %s (step `large`). Data: **synthetic** ogbg-ppa-shaped OGB folders in the npz layout "+
		"(`shardconv synth --like ogbg-ppa --graphs N`: about 243 nodes and 2,266 edges a graph, 7 float edge features, "+
		"37 classes), a set and one a tenth of it. The daemon serves NodeSam on every core to `augloader fetch` over the "+
		"Unix socket; epoch 1 is timed (epoch 0 warms the page cache and, fully cached, the indexes). %s\n\n",
		pg.command("large"), pg.machineLine())
	fmt.Fprintf(w, "| conversion | input | shards | seconds | peak RSS |\n|---|---:|---:|---:|---:|\n")
	for _, m := range pg.largeRows("convert") {
		fmt.Fprintf(w, "| %s graphs | %s | %s | %s | %.0f MiB |\n", fnum(num(m, "graphs")), mb(num(m, "input_bytes")),
			mb(num(m, "shard_bytes")), fs(num(m, "convert_s")), num(m, "rss_kib")/1024)
	}
	fmt.Fprintf(w, "\n| serving | shuffle | graphs/s | epoch s | first batch s | peak RSS | cgroup peak (with page cache) |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, m := range pg.largeRows("serve") {
		what := "fully cached (no limit, no cgroup)"
		if m["name"] == "limited" {
			what = "`--cache-limit 1GiB`, 2 GiB cgroup"
		}
		cg := "—"
		if v := num(m, "cgroup_peak_bytes"); v > 0 {
			cg = fmt.Sprintf("%.0f MiB", v/(1<<20))
		}
		fmt.Fprintf(w, "| %s | `%s` | %s | %s | %s | %.0f MiB | %s |\n", what, m["shuffle"], fnum(num(m, "graphs_per_s")),
			fs(num(m, "epoch_s")), fs(num(m, "first_batch_s")), num(m, "rss_kib")/1024, cg)
	}
	if sizes, med := pg.largeStart(); len(sizes) > 0 {
		fmt.Fprintf(w, "\nTime from starting `augloader serve --cache-limit 1GiB` to the first batch received (median of 3):")
		for i := range sizes {
			fmt.Fprintf(w, " %s graphs %s s;", fnum(sizes[i]), fs(med[i]))
		}
		fmt.Fprintf(w, " the daemon reads the manifest and the graph-size index, then only the shards of the first window.\n")
	}
	fmt.Fprintf(w, "\n")
}
