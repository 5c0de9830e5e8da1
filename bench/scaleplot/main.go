// Command scaleplot draws the linear-scalability figure from the output of
//
//	go test -run XXX -bench BenchmarkScaling -benchtime 0.5s ./aug
//
// read on stdin: time per draw against edges (log–log, with a slope-1
// reference) and nanoseconds per edge against edges, as two PNG files.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"log"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var line = regexp.MustCompile(`BenchmarkScaling/policy=(\w+)/edges=\d+\S*\s+\d+\s+([\d.]+) ns/op\s+(\d+) edges\s+([\d.]+) ns/edge`)

type point struct{ edges, ns, nsPerEdge float64 }

func main() {
	timeOut := flag.String("time", "docs/scaling-time.png", "PNG: time per draw against edges")
	perEdge := flag.String("per-edge", "docs/scaling-ns-per-edge.png", "PNG: ns per edge against edges")
	title := flag.String("title", "", "subtitle (machine, data, date)")
	flag.Parse()
	series := map[string][]point{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ns, _ := strconv.ParseFloat(m[2], 64)
		e, _ := strconv.ParseFloat(m[3], 64)
		npe, _ := strconv.ParseFloat(m[4], 64)
		series[m[1]] = append(series[m[1]], point{e, ns, npe})
	}
	if len(series) == 0 {
		log.Fatal("scaleplot: no BenchmarkScaling lines on stdin")
	}
	names := make([]string, 0, len(series))
	for k := range series {
		names = append(names, k)
	}
	sort.Strings(names)
	colors := []color.Color{color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255}}

	draw2 := func(path, ylabel string, y func(point) float64, logY bool, ref bool) {
		p := plot.New()
		p.Title.Text = "Linear scalability on subgraphs of the synthetic Reddit-scale graph"
		if *title != "" {
			p.Title.Text += "\n" + *title
		}
		p.X.Label.Text = "edges in the subgraph"
		p.Y.Label.Text = ylabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		if logY {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		} else {
			p.Y.Min = 0
		}
		p.Legend.Top, p.Legend.Left = true, true
		for i, name := range names {
			pts := series[name]
			xy := make(plotter.XYs, len(pts))
			for j, q := range pts {
				xy[j].X, xy[j].Y = q.edges, y(q)
			}
			l, s, err := plotter.NewLinePoints(xy)
			if err != nil {
				log.Fatal(err)
			}
			l.Color, s.Color = colors[i%len(colors)], colors[i%len(colors)]
			s.Shape = draw.CircleGlyph{}
			p.Add(l, s)
			p.Legend.Add(name, l, s)
			if ref && len(pts) > 0 {
				// Slope-1 reference through the largest point: linear time.
				last := pts[len(pts)-1]
				k := y(last) / last.edges
				r := plotter.XYs{{X: pts[0].edges, Y: k * pts[0].edges}, {X: last.edges, Y: y(last)}}
				rl, _ := plotter.NewLine(r)
				rl.Color, rl.Dashes = colors[i%len(colors)], []vg.Length{vg.Points(3), vg.Points(3)}
				p.Add(rl)
			}
		}
		if ref {
			p.Legend.Add("dashed: linear (slope 1)")
		}
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
			log.Fatal(err)
		}
		fmt.Println("wrote", path)
	}
	draw2(*timeOut, "seconds per augmented graph", func(q point) float64 { return q.ns / 1e9 }, true, true)
	draw2(*perEdge, "nanoseconds per edge", func(q point) float64 { return q.nsPerEdge }, false, false)
	for _, name := range names {
		pts := series[name]
		lo, hi := pts[0].nsPerEdge, pts[len(pts)-1].nsPerEdge
		fmt.Printf("%s: %.1f ns/edge at %.0f edges, %.1f at %.0f (ratio %.2f); max/min over sizes %.2f\n",
			name, lo, pts[0].edges, hi, pts[len(pts)-1].edges, hi/lo, maxMin(pts))
	}
}

func maxMin(pts []point) float64 {
	lo, hi := math.Inf(1), 0.0
	for _, q := range pts {
		lo, hi = math.Min(lo, q.nsPerEdge), math.Max(hi, q.nsPerEdge)
	}
	return hi / lo
}
