package main

import (
	"bytes"
	"fmt"
	"slices"
)

// Issue 47's steps: the cache cliff (bench/cliff.sh, step cliff) and
// shards in object storage beside MosaicML Streaming (bench/s3.sh, step s3).

// cliffMedians is the median epoch seconds and page loads of the cliff
// step's runs named name, and the pages of its set.
func (pg *page) cliffMedians(name string) (epochS, loads, pages float64, runs int) {
	var es, ls []float64
	for _, m := range pg.cliff {
		if m["run"] == name {
			es = append(es, num(m, "epoch_s"))
			ls = append(ls, num(m, "loads"))
			pages = num(m, "pages")
		}
	}
	if len(es) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(es)
	slices.Sort(ls)
	return es[len(es)/2], ls[len(ls)/2], pages, len(es)
}

func (pg *page) cliffCase() ([]any, []measuredCase) {
	limS, limLoads, pages, runs := pg.cliffMedians("limit-64MiB")
	unS, _, _, _ := pg.cliffMedians("unlimited")
	if runs == 0 || unS == 0 {
		return nil, nil
	}
	time, loads := limS/unS, limLoads/pages
	return nil, one(fmt.Sprintf("epoch %s vs %s s unlimited (%.2f×); %s page loads for %s pages (%.2f×); medians of %d",
		fs(limS), fs(unS), time, fnum(limLoads), fnum(pages), loads, runs),
		map[string]float64{"time": time, "loads": loads})
}

// s3Row is the s3 step's daemon row named name.
func (pg *page) s3Row(name string) (map[string]string, bool) {
	return rowWith(pg.s3, "kind", "s3", "name", name)
}

// s3Ratio is a remote row's graphs/s against the local folder's.
func (pg *page) s3Ratio(name string) ([]any, []measuredCase) {
	local, ok1 := pg.s3Row("local")
	remote, ok2 := pg.s3Row(name)
	if !ok1 || !ok2 {
		return nil, nil
	}
	r := num(remote, "graphs_per_s") / num(local, "graphs_per_s")
	return []any{fnum(num(local, "graphs"))}, one(fmt.Sprintf("%.0f%% (%s vs %s graphs/s)", 100*r,
		fnum(num(remote, "graphs_per_s")), fnum(num(local, "graphs_per_s"))), map[string]float64{"ratio": r})
}

func (pg *page) s3BytesCase() ([]any, []measuredCase) {
	remote, ok := pg.s3Row("s3")
	if !ok {
		return nil, nil
	}
	r := num(remote, "bytes") / num(remote, "page_bytes")
	return nil, one(fmt.Sprintf("%.2f× (%s fetched in %s GETs; the pages come to %s)", r, mb(num(remote, "bytes")),
		fnum(num(remote, "gets")), mb(num(remote, "page_bytes"))), map[string]float64{"ratio": r})
}

func (pg *page) s3FirstBatchCases() ([]any, []measuredCase) {
	var cases []measuredCase
	for _, name := range []string{"local", "s3", "s3-20ms"} {
		if m, ok := pg.s3Row(name); ok {
			cases = append(cases, measuredCase{fmt.Sprintf("%s %s s", name, fs(num(m, "first_batch_s"))),
				map[string]float64{"first_batch_s": num(m, "first_batch_s")}})
		}
	}
	return nil, cases
}

func (pg *page) s3DiskCacheCases() ([]any, []measuredCase) {
	local, ok1 := pg.s3Row("local")
	fill, ok2 := pg.s3Row("s3-20ms-disk")
	again, ok3 := pg.s3Row("s3-20ms-disk-restart")
	if !ok1 || !ok2 || !ok3 {
		return nil, nil
	}
	r := num(again, "graphs_per_s") / num(local, "graphs_per_s")
	return nil, one(fmt.Sprintf("started again: %s GETs from the start, first batch %s s (local %s s), %s graphs/s (%.0f%% of local); "+
		"the daemon that filled it: %s GETs in epoch 1, %s graphs/s",
		fnum(num(again, "gets_all")), fs(num(again, "first_batch_s")), fs(num(local, "first_batch_s")), fnum(num(again, "graphs_per_s")), 100*r,
		fnum(num(fill, "gets")), fnum(num(fill, "graphs_per_s"))), map[string]float64{"ratio": r, "gets": num(again, "gets_all")})
}

// mosaicBest is the fastest finished MosaicML run of each compression.
func (pg *page) mosaicBest() []map[string]string {
	var best []map[string]string
	for _, c := range []string{"none", "zstd"} {
		var b map[string]string
		for _, m := range pg.s3 {
			if m["kind"] == "mosaic" && m["compression"] == c && m["failed"] == "" && m["partial"] == "" &&
				(b == nil || num(m, "graphs_per_s") > num(b, "graphs_per_s")) {
				b = m
			}
		}
		if b != nil {
			best = append(best, b)
		}
	}
	return best
}

func (pg *page) mosaicCases() ([]any, []measuredCase) {
	remote, ok := pg.s3Row("s3")
	if !ok {
		return nil, nil
	}
	var cases []measuredCase
	for _, m := range pg.mosaicBest() {
		cases = append(cases, measuredCase{fmt.Sprintf("MDS %s, %s workers: %s graphs/s, first batch %s s, %s fetched in epoch 1 (ours %s graphs/s, %s s, %s)",
			m["compression"], m["workers"], fnum(num(m, "graphs_per_s")), fs(num(m, "first_batch_s")), mb(num(m, "bytes")),
			fnum(num(remote, "graphs_per_s")), fs(num(remote, "first_batch_s")), mb(num(remote, "bytes"))),
			map[string]float64{"speedup": num(remote, "graphs_per_s") / num(m, "graphs_per_s")}})
	}
	return nil, cases
}

// writeCliff: the cache cliff of issue 47 (step cliff).
func (pg *page) writeCliff(w *bytes.Buffer) {
	if !section(w, "The cache cliff (`bench/cliff.sh`)", "cliff.txt", pg.cliff) {
		return
	}
	fmt.Fprintf(w, "Command: %s (step `cliff`). Data: **synthetic** COLLAB-shaped set of 5,000 graphs in one default shard; "+
		"`serve --policy nodesam --shuffle window:4 --memory-budget 64MiB --ppr-cache 0`, one epoch fetched over the socket, "+
		"under `--cache-limit 64MiB` and without a limit, in turn. A window of 4 pages is just over the limit: a cache that drops whole "+
		"pages reloads one for almost every batch (bench/results/cliff.txt keeps such a run); this one first sheds NodeSam indexes, "+
		"then compacts pages to the graphs still needed. %s\n\n", pg.command("cliff"), pg.machineLine())
	fmt.Fprintf(w, "| run | epoch s | page loads | pages | compactions | trims |\n|---|---:|---:|---:|---:|---:|\n")
	for _, m := range pg.cliff {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", m["run"], fs(num(m, "epoch_s")), fnum(num(m, "loads")),
			fnum(num(m, "pages")), fnum(num(m, "compactions")), fnum(num(m, "trims")))
	}
	fmt.Fprintf(w, "\n")
}

// writeS3: shards in object storage beside MosaicML Streaming (step s3).
func (pg *page) writeS3(w *bytes.Buffer) {
	if !section(w, "Shards in object storage (`bench/s3.sh`)", "s3.txt", pg.s3) {
		return
	}
	fmt.Fprintf(w, "Command: %s (step `s3`). Data: **synthetic** ogbg-ppa-shaped set (as `bench/large.sh`), served with "+
		"`--policy nodesam --cache-limit 1GiB` over the Unix socket to `augloader fetch` from the local folder, from a loopback "+
		"s3proxy 2.7.0 (`s3://`), and from that server behind `bench/latencyproxy` adding 20 ms to every request. Epoch 0 warms, "+
		"epoch 1 is timed; the GETs and bytes are epoch 1's (`augloader_objstore_*`); *pages* is what the epoch's pages come to "+
		"read once each; the `-disk` rows add `--disk-cache` (a daemon that fills it, epoch 0 fetching, then one started again on it). %s\n\n", pg.command("s3"), pg.machineLine())
	fmt.Fprintf(w, "| source | shuffle | graphs/s | epoch s | first batch s | GETs | fetched | pages |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range pg.s3 {
		if m["kind"] != "s3" {
			continue
		}
		fmt.Fprintf(w, "| %s | `%s` | %s | %s | %s | %s | %s | %s |\n", m["name"], m["shuffle"], fnum(num(m, "graphs_per_s")),
			fs(num(m, "epoch_s")), fs(num(m, "first_batch_s")), fnum(num(m, "gets")), mb(num(m, "bytes")), mb(num(m, "page_bytes")))
	}
	var sets []map[string]string
	for _, m := range pg.s3 {
		if m["kind"] == "mosaic-set" {
			sets = append(sets, m)
		}
	}
	if len(sets) == 0 {
		fmt.Fprintf(w, "\n")
		return
	}
	fmt.Fprintf(w, "\nThe peer, MosaicML Streaming 0.13.0 (`bench/peers/mosaic_s3.py`): the same graphs packed as MDS shards "+
		"(one sample a graph: `num_nodes`, `edge_index` int32, `edge_attr` float32, `y`), uncompressed and zstd, on the same "+
		"server, read through `bench/latencyproxy` with no delay (it counts the GETs and body bytes); `StreamingDataset` "+
		"shuffled (py1e) with a fresh local cache and `cache_limit` half of what the set takes there (raw shards, and their zips "+
		"when compressed; Streaming's floor is four shards), a DataLoader at 0, 1 and 2 workers; every sample's arrays are touched. "+
		"Its shuffle block is set to about a quarter of the cache in samples, as the daemon's default window fills about a quarter "+
		"of `--cache-limit`; one run keeps Streaming's default block (larger than the set), which refetches shards without end "+
		"under such a limit (mosaicml/streaming#339): its epoch 0 is cut after a minute and shown as *partial*. It reads; the daemon "+
		"also augments (NodeSam). Epoch 1 timed, as above.\n\n")
	fmt.Fprintf(w, "| MDS set | compression | shards | size | in its local cache |\n|---|---|---:|---:|---:|\n")
	for _, m := range sets {
		fmt.Fprintf(w, "| %s graphs | %s | %s | %s | %s |\n", fnum(num(m, "graphs")), m["compression"], fnum(num(m, "shards")),
			mb(num(m, "bytes")), mb(num(m, "local_bytes")))
	}
	fmt.Fprintf(w, "\n| reader | workers | cache_limit | shuffle block | graphs/s | epoch s | first batch s | GETs | fetched |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range pg.s3 {
		if m["kind"] != "mosaic" {
			continue
		}
		if m["failed"] != "" {
			fmt.Fprintf(w, "| Streaming, MDS %s | %s | — | — | failed: `%s` | | | | |\n", m["compression"], m["workers"], m["failed"])
			continue
		}
		epochS := fs(num(m, "epoch_s"))
		if m["partial"] != "" {
			epochS = fmt.Sprintf("*partial*: epoch 0, %s graphs in %s", fnum(num(m, "graphs")), epochS)
		}
		fmt.Fprintf(w, "| Streaming, MDS %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m["compression"], m["workers"], mb(num(m, "cache_limit")),
			m["shuffle_block_size"], fnum(num(m, "graphs_per_s")), epochS, fs(num(m, "first_batch_s")), fnum(num(m, "gets")), mb(num(m, "bytes")))
	}
	if m, ok := pg.s3Row("s3"); ok {
		fmt.Fprintf(w, "| augloader (NodeSam), s3:// | 2 | 1.0 GiB | `%s` | %s | %s | %s | %s | %s |\n", m["shuffle"], fnum(num(m, "graphs_per_s")),
			fs(num(m, "epoch_s")), fs(num(m, "first_batch_s")), fnum(num(m, "gets")), mb(num(m, "bytes")))
	}
	fmt.Fprintf(w, "\n")
}
