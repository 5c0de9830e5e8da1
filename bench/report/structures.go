package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
)

// writeStructures: 3D atomistic structures (issue #67) beside the tools
// MLIP trainers use, from bench/python_structures.py's output saved as
// bench/results/structures.txt (it needs .venv-torch2's mace-torch, ase,
// matscipy and vesin).
func (pg *page) writeStructures(w *bytes.Buffer) {
	r := pg.results["structures"]
	fmt.Fprintf(w, "## Structures for interatomic potentials (`bench/python_structures.py`)\n\n")
	if r == nil || len(r.rows) == 0 {
		w.WriteString("No results are saved (bench/results/structures.txt is missing): run bench/python_structures.py in .venv-torch2.\n\n")
		return
	}
	fmt.Fprintf(w, "From `%s`: %s\n\n", r.file, strings.Join(r.about, " "))
	w.WriteString("**Neighbour lists on one core**, the same 64 structures at 6 Å for every tool (ours: `go test -bench BenchmarkOC20 ./atoms -cpu 1`; " +
		"the others from Python, each a full list of (i, j, S)):\n\n| tool | M edges/s | vs vesin |\n|---|---:|---:|\n")
	vesin := 0.0
	for _, m := range r.rows {
		if m["kind"] == "nl" && m["tool"] == "vesin" {
			vesin = num(m, "medges_s")
		}
	}
	for _, m := range r.rows {
		if m["kind"] == "nl" {
			fmt.Fprintf(w, "| %s | %s | %s× |\n", m["tool"], fs(num(m, "medges_s")), fs(num(m, "medges_s")/vesin))
		}
	}
	w.WriteString("\n**Reading the extxyz file**: `shardconv convert` parses it on every core, builds every neighbour list and writes zstd shards; " +
		"`ase.io.read` only parses (and `+ vesin` adds the lists, what a loader converting on the fly then does):\n\n" +
		"| tool | structures | wall s | structures/s |\n|---|---:|---:|---:|\n")
	for _, m := range r.rows {
		if m["kind"] == "read" {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", m["tool"], m["structures"], fs(num(m, "wall_s")), m["structures_s"])
		}
	}
	pg.writeConvertFloor(w, r.rows)
	w.WriteString("\n**Into MACE's batch fields** (batch 16, float64, every field MACE's `AtomicData` collates), each loader at its fastest of " +
		"DataLoader workers 0, 1 and 2 (persistent); median of the epochs. *on the fly*: MACE's `AtomicData.from_config` in `__getitem__` " +
		"(matscipy's neighbour list for every sample of every epoch, as its LMDB and HDF5 datasets do); *in memory*: a list converted once; " +
		"ours: `AugloaderDataset(url, layout=\"mace\", z_table=…)` over shared memory (`unix+shm://`) or the socket, the daemon's CPU beside it:\n\n" +
		loaderTableHead)
	writeLoaderRows(w, r.rows, "mace")
	for _, m := range r.rows {
		if m["kind"] == "mace-ratio" {
			writeLoaderRatio(w, "MACE's loader "+m["vs"], m)
		}
	}
	w.WriteString("\n*loader CPU* is what loading costs the trainer's machine: the training process and its DataLoader workers " +
		"(live ones read from /proc, reaped ones from getrusage's children; `bench/peers/cpuclock.py`); *trainer process* is the training " +
		"process's own. Our daemon's CPU is counted apart, and in the second fraction of each line.\n\n")
	writeFairchem(w, r.rows)
	pg.writeStructuresScale(w)
}

// writeStructuresScale: a million structures converted out of core and
// served from an S3-compatible server under a cache limit
// (bench/structures_scale.sh, saved as bench/results/structures-scale.txt).
func (pg *page) writeStructuresScale(w *bytes.Buffer) {
	r := pg.results["structures-scale"]
	if r == nil || len(r.rows) == 0 {
		w.WriteString("**At scale**: no results are saved (bench/results/structures-scale.txt is missing): run bench/structures_scale.sh.\n\n")
		return
	}
	fmt.Fprintf(w, "**At scale**, from `%s`: %s\n\n| step | structures | s | structures/s | peak RSS MiB | bytes |\n|---|---:|---:|---:|---:|---:|\n",
		r.file, strings.Join(r.about, " "))
	for _, m := range r.rows {
		if m["kind"] != "scale" {
			continue
		}
		secs, rate, rss, nbytes := m["seconds"], m["structures_s"], m["peak_rss_mib"], m["bytes"]
		switch m["step"] {
		case "convert":
			nbytes = m["shard_bytes"]
		case "serve-s3":
			secs = m["epoch_s"]
			nbytes = m["bytes"] + " in " + m["gets"] + " GETs of " + m["shard_bytes"] + " stored"
		}
		for _, v := range []*string{&secs, &rate, &rss, &nbytes} {
			if *v == "" {
				*v = "—"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", m["step"], m["structures"], secs, rate, rss, nbytes)
	}
	w.WriteString("\n")
}

// writeConvertFloor says how far conversion is from ase.io.read and what
// bounds it on this machine: the neighbour lists alone, at our measured
// one-core rate on every core, before any parsing or compression.
func (pg *page) writeConvertFloor(w *bytes.Buffer, rows []map[string]string) {
	var ours, ase, nl map[string]string
	cores := 0.0
	for _, m := range rows {
		switch {
		case m["kind"] == "read" && m["tool"] == "shardconv-convert":
			ours = m
		case m["kind"] == "read" && m["tool"] == "ase.io.read":
			ase = m
		case m["kind"] == "nl" && m["tool"] == "augloader":
			nl = m
		case m["kind"] == "about":
			cores = num(m, "cores")
		}
	}
	if ours == nil || ase == nil || nl == nil || cores == 0 || num(nl, "structures") == 0 {
		return
	}
	edges := num(nl, "degree") * num(nl, "atoms") / num(nl, "structures")
	bound := cores * num(nl, "medges_s") * 1e6 / edges
	fmt.Fprintf(w, "\n- conversion against `ase.io.read`: %.1f× (#67's goal was 20×: not met). The neighbour lists alone bound it here: "+
		"%.0f edges a structure at %s M edges/s a core on %.0f cores cap conversion at %.0f structures/s, %.1f× `ase.io.read`, "+
		"before any parsing or compression; 20× at this density takes %.0f cores or more (`ase.io.read` uses one).\n",
		num(ours, "structures_s")/num(ase, "structures_s"), edges, fs(num(nl, "medges_s")), cores, bound,
		bound/num(ase, "structures_s"), math.Ceil(20*num(ase, "structures_s")*edges/(num(nl, "medges_s")*1e6)))
}

// writeFairchem: the same set into fairchem's AtomicData fields, fairchem's
// AseDBDataset with its CPU graph (in its own venv) beside ours.
func writeFairchem(w *bytes.Buffer, rows []map[string]string) {
	var best []map[string]string
	daemon := map[string]string{}
	for _, m := range rows {
		switch m["kind"] {
		case "fairchem-best":
			best = append(best, m)
		case "fairchem-daemon":
			daemon[m["loader"]] = fs(num(m, "daemon_cpu_s"))
		case "fairchem-missing":
			fmt.Fprintf(w, "**Into fairchem's batch fields**: not measured in this run (%s).\n\n", m["note"])
		}
	}
	if len(best) == 0 {
		return
	}
	w.WriteString("**Into fairchem's batch fields** (batch 16, float32, `AtomicData`'s fields), each at its fastest of DataLoader workers 0, 1 and 2: " +
		"fairchem 2.24's `AseDBDataset` over an `.aselmdb` of the same structures with its CPU graph (`a2g_args` `r_edges`: `AtomicData.from_ase`, " +
		"pymatgen's neighbour list at 6 Å, 30 neighbours an atom at most), in its own venv (torch 2.13; `bench/peers/fairchem_structures.py`), " +
		"against `AugloaderDataset(url, layout=\"fairchem\")` over shards converted with `--neighbours fairchem --max-neighbors 30`:\n\n" +
		loaderTableHead)
	writeLoaderRows(w, rows, "fairchem")
	for _, m := range rows {
		if m["kind"] == "fairchem-ratio" {
			writeLoaderRatio(w, "fairchem's CPU-graph loader", m)
		}
	}
	w.WriteString("\n")
}

const loaderTableHead = "| loader | workers | structures/s | loader CPU s / epoch | trainer process CPU s / epoch | daemon CPU s / epoch |\n" +
	"|---|---:|---:|---:|---:|---:|\n"

// writeLoaderRows: each loader's fastest configuration (kind+"-best"),
// its daemon's CPU (kind+"-daemon") beside it where it has one.
func writeLoaderRows(w *bytes.Buffer, rows []map[string]string, kind string) {
	daemon := map[string]string{}
	for _, m := range rows {
		if m["kind"] == kind+"-daemon" {
			daemon[m["loader"]] = fs(num(m, "daemon_cpu_s"))
		}
	}
	for _, m := range rows {
		if m["kind"] != kind+"-best" {
			continue
		}
		d, loader := daemon[m["loader"]], "—"
		if d == "" {
			d = "—"
		}
		if m["loader_cpu_s"] != "" { // results saved before the workers' CPU was counted have none
			loader = fs(num(m, "loader_cpu_s"))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", m["loader"], m["workers"], m["structures_s"], loader, fs(num(m, "trainer_cpu_s")), d)
	}
	w.WriteString("\n")
}

// writeLoaderRatio: one ratio row (wall_x, trainer_cpu_frac and, where
// saved, with_daemon_cpu_frac) as a sentence.
func writeLoaderRatio(w *bytes.Buffer, peer string, m map[string]string) {
	fmt.Fprintf(w, "- against %s: %s× the structures a second; the loader's CPU %s of its", peer, fs(num(m, "wall_x")), fs(num(m, "trainer_cpu_frac")))
	if m["with_daemon_cpu_frac"] != "" {
		fmt.Fprintf(w, ", %s with our daemon's counted", fs(num(m, "with_daemon_cpu_frac")))
	}
	w.WriteString(".\n")
}
