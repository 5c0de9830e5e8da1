package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"github.com/augloader/augloader/internal/iox"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var palette = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255},
	color.RGBA{R: 255, G: 127, B: 14, A: 255},
	color.RGBA{R: 148, G: 103, B: 189, A: 255},
	color.RGBA{R: 140, G: 86, B: 75, A: 255},
}

func titled(title, subtitle string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	if subtitle != "" {
		p.Title.Text += "\n" + subtitle
	}
	return p
}

// scalePoint is one subgraph size of BenchmarkScaling.
type scalePoint struct{ edges, ns, nsPerEdge float64 }

// plotScaling draws time per draw against edges (log–log, with a slope-1
// reference through the largest point) and ns per edge against edges.
func plotScaling(series map[string][]scalePoint, names []string, subtitle, timePath, perEdgePath string) error {
	draw2 := func(path, ylabel string, y func(scalePoint) float64, logY, ref bool) error {
		p := titled("Linear scalability on subgraphs of the synthetic Reddit-scale graph", subtitle)
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
				return err
			}
			c := palette[i%len(palette)]
			l.Color, s.Color = c, c
			s.Shape = draw.CircleGlyph{}
			p.Add(l, s)
			p.Legend.Add(name, l, s)
			if ref && len(pts) > 0 {
				last := pts[len(pts)-1]
				k := y(last) / last.edges
				rl, err := plotter.NewLine(plotter.XYs{{X: pts[0].edges, Y: k * pts[0].edges}, {X: last.edges, Y: y(last)}})
				if err != nil {
					return err
				}
				rl.Color, rl.Dashes = c, []vg.Length{vg.Points(3), vg.Points(3)}
				p.Add(rl)
			}
		}
		if ref {
			p.Legend.Add("dashed: linear (slope 1)")
		}
		return savePNG(p, 7*vg.Inch, 4.5*vg.Inch, path)
	}
	if err := draw2(timePath, "seconds per augmented graph", func(q scalePoint) float64 { return q.ns / 1e9 }, true, true); err != nil {
		return err
	}
	return draw2(perEdgePath, "nanoseconds per edge", func(q scalePoint) float64 { return q.nsPerEdge }, false, false)
}

// stageBar is one (policy, workers) group: the added wall time of each
// pipeline stage, stacked.
type stageBar struct {
	label string
	parts []float64 // seconds, one per stageNames entry
}

// plotStages stacks, per policy and worker count, what each stage adds to
// an epoch's wall time, with the epoch's bytes at the raw Unix-socket
// bandwidth as a dashed line.
func plotStages(dataset string, bars []stageBar, partNames []string, floorSec float64, floorLabel, subtitle, path string) error {
	p := titled(fmt.Sprintf("%s: what each stage adds to an epoch (served over the Unix socket)", dataset), subtitle)
	p.Y.Label.Text = "seconds per epoch"
	labels := make([]string, len(bars))
	for i, b := range bars {
		labels[i] = b.label
	}
	var below *plotter.BarChart
	for si, name := range partNames {
		vals := make(plotter.Values, len(bars))
		for i, b := range bars {
			vals[i] = math.Max(b.parts[si], 0)
		}
		bc, err := plotter.NewBarChart(vals, vg.Points(28))
		if err != nil {
			return err
		}
		bc.Color = palette[si%len(palette)]
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(name, bc)
	}
	if floorSec > 0 {
		line, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: floorSec}, {X: float64(len(bars)) - 0.5, Y: floorSec}})
		if err != nil {
			return err
		}
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line)
		p.Legend.Add(floorLabel, line)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(labels...)
	return savePNG(p, 8.5*vg.Inch, 4.8*vg.Inch, path)
}

// plotBars draws one horizontal bar per measurement (seconds per epoch),
// augloader's in one colour and the peers' in another.
func plotBars(title, subtitle string, labels []string, secs []float64, path string) error {
	p := titled(title, subtitle)
	p.X.Label.Text = "seconds per epoch (median)"
	ours, peers := make(plotter.Values, len(secs)), make(plotter.Values, len(secs))
	for i, l := range labels {
		if strings.HasPrefix(strings.TrimPrefix(l, "paired/"), "augloader/") {
			ours[i] = secs[i]
		} else {
			peers[i] = secs[i]
		}
	}
	for i, vals := range []plotter.Values{ours, peers} {
		bc, err := plotter.NewBarChart(vals, vg.Points(14))
		if err != nil {
			return err
		}
		bc.Horizontal = true
		bc.Color = palette[i*3]
		bc.LineStyle.Width = 0
		p.Add(bc)
		p.Legend.Add([]string{"augloader", "PyG"}[i], bc)
	}
	p.Legend.Top = true
	p.NominalY(labels...)
	p.X.Min, p.X.Max = 0, 1.05*slices.Max(secs)
	return savePNG(p, 8*vg.Inch, vg.Length(1.2+0.32*float64(len(labels)))*vg.Inch, path)
}

// savePNG renders p and writes it crash-safely (iox.WriteFileAtomic).
func savePNG(p *plot.Plot, w, h vg.Length, path string) error {
	wt, err := p.WriterTo(w, h, "png")
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return err
	}
	return iox.WriteFileAtomic(path, buf.Bytes(), 0o644)
}
