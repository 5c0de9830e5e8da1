package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The torchrun section: a row per case with its median and range; a page
// without bench/results/torchrun.txt says how to make it.
func TestTorchrunSection(t *testing.T) {
	dir := t.TempDir()
	body := "# bench/python_torchrun.py at abc\n" +
		"RESULT kind=machine cores=2 torch=2.9.1\n" +
		"RESULT kind=torchrun case=start nodes=2 procs=2 first_batch_s=11.5 min_s=11.1 max_s=11.7 ranks=4 runs=3\n" +
		"RESULT kind=torchrun case=restart nodes=2 procs=2 first_batch_s=9.2 min_s=9.1 max_s=9.6 ranks=2 runs=3\n"
	if err := os.WriteFile(filepath.Join(dir, "torchrun.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readResultsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	(&page{results: res}).writeTorchrun(&w)
	pageHas(t, w.String(),
		"From `bench/results/torchrun.txt`: bench/python_torchrun.py at abc",
		"| start | 2 × 2 | 4 | 11.500 | 11.100–11.700 | 3 |",
		"| restart | 2 × 2 | 2 | 9.200 | 9.100–9.600 | 3 |")
	w.Reset()
	(&page{}).writeTorchrun(&w)
	if !strings.Contains(w.String(), "bench/results/torchrun.txt is missing") {
		t.Errorf("a page without torchrun.txt: %q", w.String())
	}
}

// The structures section: the neighbour-list rates against vesin, the
// reading rows, each MACE loader at its fastest (the loader's CPU, the
// trainer process's, the daemon's) and the ratios.
func TestStructuresSection(t *testing.T) {
	dir := t.TempDir()
	body := "# bench/python_structures.py at abc\n" +
		"RESULT kind=nl tool=augloader medges_s=40 structures=64\nRESULT kind=nl tool=vesin medges_s=8 structures=64\n" +
		"RESULT kind=read tool=ase.io.read structures=10 wall_s=2 structures_s=5\n" +
		"RESULT kind=mace-best loader=augloader workers=0 structures=10 wall_s=1 loader_cpu_s=0.6 trainer_cpu_s=0.5 structures_s=10\n" +
		"RESULT kind=mace-daemon loader=augloader daemon_cpu_s=0.25\n" +
		"RESULT kind=mace-ratio vs=on-the-fly wall_x=19.7 trainer_cpu_frac=0.046 with_daemon_cpu_frac=0.07\n"
	if err := os.WriteFile(filepath.Join(dir, "structures.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	scale := "# bench/structures_scale.sh at abc\n" +
		"RESULT kind=scale step=convert structures=1000 seconds=2.5 structures_s=400 peak_rss_mib=300 shard_bytes=9000\n" +
		"RESULT kind=scale step=serve-s3 structures=1000 epoch_s=1.5 structures_s=666 peak_rss_mib=900 gets=3 bytes=8900 shard_bytes=9000\n"
	if err := os.WriteFile(filepath.Join(dir, "structures-scale.txt"), []byte(scale), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := readResultsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	(&page{results: res}).writeStructures(&w)
	pageHas(t, w.String(), "| augloader | 40.000 | 5.000× |", "| ase.io.read | 10 | 2.000 | 5 |",
		"| augloader | 0 | 10 | 0.600 | 0.500 | 0.250 |",
		"against MACE's loader on-the-fly: 19.700× the structures a second; the loader's CPU 0.046 of its, 0.070 with our daemon's counted.",
		"| convert | 1000 | 2.5 | 400 | 300 | 9000 |", "| serve-s3 | 1000 | 1.5 | 666 | 900 | 8900 in 3 GETs of 9000 stored |")
}

// The LitData section: conversions beside shardconv's, every loader
// configuration with the fastest marked, the paired ratio and each check
// with its URL-quoted values read back.
func TestLitDataSection(t *testing.T) {
	dir := t.TempDir()
	body := "noise\n" +
		"RESULT kind=about graphs=5000 litdata=0.2.76 torch_geometric=2.8.1 torch=2.9.1+cu128 cores=2 shard_bytes=30000000\n" +
		"RESULT kind=litdata-optimize storage=dense compression=zstd graphs=5000 seconds=22.245 bytes=26224880\n" +
		"RESULT kind=litdata name=litdata/dense-zstd/workers=0 wall_s=2.000 loader_cpu_s=3.000 graphs=5000\n" +
		"RESULT kind=litdata name=litdata/codes-zstd/workers=0 wall_s=1.000 loader_cpu_s=2.000 graphs=5000\n" +
		"RESULT kind=litdata-fastest name=litdata/codes-zstd/workers=0\n" +
		"RESULT kind=paired name=augloader/shm/nodesam/pyg-batch wall_s=0.200 trainer_cpu_s=0.150 daemon_cpu_s=0.150 epochs=5\n" +
		"RESULT kind=paired name=litdata/codes-zstd/workers=0 wall_s=1.200 loader_cpu_s=2.400 epochs=5\n" +
		"RESULT kind=check name=flipped-litdata-dense-none holds=no file=chunk-0-0.bin graphs_that_differ=1 error=None\n" +
		"RESULT kind=check name=flipped-augloader holds=yes error=shard%3A%20checksum%20mismatch%20%7C%20x\n"
	if err := os.WriteFile(filepath.Join(dir, "litdata.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := readResultLines(filepath.Join(dir, "litdata.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	(&page{litdata: rows, convert: map[string]float64{"convert_s": 1.5}, cmds: map[string]string{}}).writeLitData(&w)
	pageHas(t, w.String(),
		"| `litdata.optimize`, dense, compression zstd (from the Data in memory) | 22.245 | 26 |",
		"| `shardconv convert` of the TU text (parsing it too; step `convert`) | 1.500 | 30 |",
		"| **`litdata/codes-zstd/workers=0`** (fastest) | 1.000 | 2.000 | 5,000 |",
		"| `litdata/dense-zstd/workers=0` | 2.000 | 3.000 | 2,500 |",
		"**6.0× the wall time, 8.0× the CPU**",
		"| `flipped-litdata-dense-none` | no | error: None; file: chunk-0-0.bin; graphs_that_differ: 1 |",
		"| `flipped-augloader` | yes | error: shard: checksum mismatch \\| x |")
}

// The headline on a PyG user's path, with the profile bench/profile.sh
// saved: the trainer's functions and the daemon's beside it.
func TestHeadlinePygProfile(t *testing.T) {
	dir := t.TempDir()
	py := `{"name": "env", "python": "3.11", "torch_geometric": "2.8.1", "torch": "2.9.1+cu128"}
{"name": "paired/augloader/shm/nodesam/pyg-batch", "epochs": 3, "s_per_epoch": [0.14, 0.15, 0.2], "best_s": 0.14, "median_s": 0.15, "graphs": 5000, "batches": 157, "bytes": 0, "trainer_cpu_s": 0.12, "daemon_cpu_s": 0.13, "edges": 2e7, "nodes": 370000, "feature_dim": 369}
{"name": "paired/pyg/dropout_edge/fastest", "epochs": 3, "s_per_epoch": [1.1, 1.2, 1.5], "best_s": 1.1, "median_s": 1.2, "graphs": 5000, "batches": 0, "bytes": 0, "config": "pyg/dropout_edge/workers=0", "loader_cpu_s": 2.4}
`
	prof := "# bench/profile.sh at abc\n" +
		"RESULT kind=trainer-total epochs=5 s_per_epoch=0.1500\n" +
		"RESULT kind=trainer-profile func=augloader/batch.py:123(edge_index) calls_per_epoch=157 s_per_epoch=0.0400 share=0.267\n" +
		"RESULT kind=daemon-profile func=aug.mergeRun flat=0.95s share=18.77%\n"
	for name, body := range map[string]string{"python.jsonl": py, "profile.txt": prof} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := readPython(filepath.Join(dir, "python.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := readResultsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	(&page{py: p, results: res, machine: machine{cores: 2}}).writeHeadlinePyg(&w)
	pageHas(t, w.String(),
		"0.150 vs 1.200 s/epoch (medians, epochs alternating, 3 each): 8.00×; CPU 0.120 + 0.130 s (trainer + daemon) vs 2.400 s: 1/9.6",
		"| `augloader/batch.py:123(edge_index)` | 157 | 0.040 | 27% |",
		"| `aug.mergeRun` | 0.95s | 18.77% |")
}
