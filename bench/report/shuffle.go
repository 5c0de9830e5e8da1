package main

import (
	"bytes"
	"fmt"
	"strings"
)

// shuffleLayouts are the folder layouts of the shuffle step, in order: the
// default --shard-size, and shards of about 256 KiB.
var shuffleLayouts = []struct{ label, what string }{
	{"default", "converted with the default `--shard-size` (one shard)"},
	{"256KiB", "cut into shards of about 256 KiB"},
	{"random", "converted with the default `--shard-size` and `--order random:1` (graphs stored in a seeded random order, ids unchanged)"},
}

// writeShuffle: how well each order mixes an epoch (step shuffle).
func (pg *page) writeShuffle(w *bytes.Buffer) {
	if !section(w, "Shuffle quality (`bench/shuffle`)", "shuffle.txt", pg.shuffle) {
		return
	}
	first := pg.shuffle[0]
	fmt.Fprintf(w, "Command: %s (step `shuffle`). The real COLLAB (%s graphs, stored in class order as TU lists them); batches of 32, "+
		"five epochs. A window's blocks are pages (a shard file's record batches: at most 1,024 graphs and 4 Mi values); "+
		"`window:SIZE` is as many pages as the largest fills in SIZE, and the default under a cache limit fills about a quarter "+
		"of it. Per order: the mean number of distinct pages a batch draws from, and the mean total variation distance between "+
		"a batch's class mix and the dataset's (0: the dataset's mix; the global permutation's value is what batches of 32 drawn "+
		"uniformly give). %s\n\n", pg.command("shuffle"), fnum(num(first, "graphs")), pg.machineLine())
	for _, l := range shuffleLayouts {
		var rows []map[string]string
		for _, m := range pg.shuffle {
			if m["layout"] == l.label {
				rows = append(rows, m)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "COLLAB %s: %s pages, the largest about %.1f MiB decoded.\n\n", l.what, fnum(num(rows[0], "total_pages")),
			num(rows[0], "largest_page_bytes")/(1<<20))
		fmt.Fprintf(w, "| order | drawn as | pages a batch draws from | class-mix distance to the dataset |\n|---|---|---:|---:|\n")
		for _, m := range rows {
			asked := "`" + m["asked"] + "`"
			if lim, ok := strings.CutPrefix(m["asked"], "default:"); ok {
				asked = "default under `--cache-limit " + lim + "`"
			}
			fmt.Fprintf(w, "| %s | `%s` | %.1f | %.3f |\n", asked, m["order"], num(m, "pages_per_batch"), num(m, "tv"))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "A set stored sorted by class (COLLAB is) mixes only as well as the number of pages a window holds: "+
		"under a limit that holds one page a window, a batch sees one class. Smaller shards help little (their pages are "+
		"smaller, but a window by size holds as many bytes); stored in a random order (`shardconv convert --order random:SEED`) "+
		"it mixes as the global permutation does with one page a window.\n\n")
}

// shuffleCase is #36's case for shards of this layout: the default
// window's class-mix distance against the global shuffle's.
func shuffleCase(layout string) func(*page) ([]any, []measuredCase) {
	return func(pg *page) ([]any, []measuredCase) {
		if len(pg.shuffle) == 0 {
			return nil, nil
		}
		glob, _ := rowWith(pg.shuffle, "layout", "default", "asked", "global")
		def, _ := rowWith(pg.shuffle, "layout", layout, "asked", "default:64MiB")
		r := num(def, "tv") / num(glob, "tv")
		return nil, one(fmt.Sprintf("%.1f× (%.3f with `%s` vs %.3f)", r, num(def, "tv"), def["order"], num(glob, "tv")),
			map[string]float64{"ratio": r})
	}
}
