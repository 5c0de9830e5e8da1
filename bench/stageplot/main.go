// Command stageplot draws where an epoch's time goes, from the output of
//
//	go test -run XXX -bench 'Epoch|Limit' -benchtime 3x ./bench
//
// read on stdin: for each dataset, per policy and worker count, seconds per
// epoch for the stages augment (the policy alone), loader (plus collation)
// and socket (plus Arrow IPC encoding, the Unix socket and the client's
// decoding), with the socket floor (the epoch's bytes at the machine's raw
// Unix-socket bandwidth, measured in the same run) as a dashed line.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"regexp"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var (
	epochLine = regexp.MustCompile(`Benchmark(\w+)Epoch/policy=(\w+)/workers=(\d+)/stage=(\w+)\S*\s+\d+\s+\d+ ns/op.*?([\d.]+) s/epoch`)
	bytesRe   = regexp.MustCompile(`([\d.]+) MB/epoch`)
	socketRe  = regexp.MustCompile(`BenchmarkLimitUnixSocket\S*\s+\d+\s+\d+ ns/op\s+([\d.]+) MB/s`)
)

type key struct{ policy, workers string }

func main() {
	outDir := flag.String("out", "docs", "folder for stages-<dataset>.png")
	title := flag.String("title", "", "subtitle (machine, date)")
	flag.Parse()
	// dataset -> (policy, workers) -> stage -> seconds
	data := map[string]map[key]map[string]float64{}
	mbPerEpoch := map[string]float64{}
	var socketMBs float64
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := socketRe.FindStringSubmatch(line); m != nil {
			socketMBs, _ = strconv.ParseFloat(m[1], 64)
			continue
		}
		m := epochLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ds, k, stage := m[1], key{m[2], m[3]}, m[4]
		secs, _ := strconv.ParseFloat(m[5], 64)
		if data[ds] == nil {
			data[ds] = map[key]map[string]float64{}
		}
		if data[ds][k] == nil {
			data[ds][k] = map[string]float64{}
		}
		data[ds][k][stage] = secs
		if b := bytesRe.FindStringSubmatch(line); b != nil {
			mbPerEpoch[ds], _ = strconv.ParseFloat(b[1], 64)
		}
	}
	if len(data) == 0 {
		log.Fatal("stageplot: no epoch benchmark lines on stdin")
	}
	stages := []string{"augment", "loader", "socket"}
	colors := []color.Color{color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255}}
	for ds, rows := range data {
		keys := make([]key, 0, len(rows))
		for k := range rows {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].policy != keys[j].policy {
				return keys[i].policy < keys[j].policy
			}
			return keys[i].workers < keys[j].workers
		})
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: seconds per epoch by stage", ds)
		if *title != "" {
			p.Title.Text += "\n" + *title
		}
		p.Y.Label.Text = "seconds per epoch"
		labels := make([]string, len(keys))
		for i, k := range keys {
			labels[i] = k.policy + "\n" + k.workers + " worker(s)"
		}
		w := vg.Points(12)
		for si, st := range stages {
			vals := make(plotter.Values, len(keys))
			for i, k := range keys {
				vals[i] = rows[k][st]
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				log.Fatal(err)
			}
			bars.Color = colors[si]
			bars.LineStyle.Width = 0
			bars.Offset = vg.Length(si-1) * w
			p.Add(bars)
			p.Legend.Add(st, bars)
		}
		if socketMBs > 0 && mbPerEpoch[ds] > 0 {
			floor := mbPerEpoch[ds] / socketMBs
			line, _ := plotter.NewLine(plotter.XYs{{X: -0.5, Y: floor}, {X: float64(len(keys)) - 0.5, Y: floor}})
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("socket floor: %.0f MB at %.1f GB/s", mbPerEpoch[ds], socketMBs/1000), line)
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.NominalX(labels...)
		path := fmt.Sprintf("%s/stages-%s.png", *outDir, ds)
		if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
			log.Fatal(err)
		}
		fmt.Println("wrote", path)
	}
}
