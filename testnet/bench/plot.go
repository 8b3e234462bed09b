package bench

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
)

// Series is one line of a plot. Lo and Hi, when set, give each point a
// vertical range (drawn as a whisker), e.g. the minimum and maximum of the
// repeats around a median.
type Series struct {
	Name   string
	X, Y   []float64
	Lo, Hi []float64
}

// Band is a shaded range of x behind the series, e.g. a zone's power cut
// on a time axis. Bands of the same Name share a colour and one legend
// entry.
type Band struct {
	Name     string
	From, To float64
}

// Plot is a line plot with linear axes starting at zero, in the style of
// the paper's Figs. 9-11: x is the workflow size, y the completion time.
type Plot struct {
	Title, XLabel, YLabel string
	Series                []Series
	// Bands are shaded behind the series (clipped to the x axis).
	Bands []Band
	// Width and Height are the SVG size in pixels (0: 640×400).
	Width, Height int
}

// bandPalette holds light tints for Bands.
var bandPalette = []string{"#9e9e9e", "#e0b36b", "#8fb8de", "#b5d6a7"}

// palette is colour-blind safe (Okabe-Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"}

// WriteSVG writes the plot as a standalone SVG document: axes with ticks
// and labels, one polyline with point markers per series, whiskers for
// Lo/Hi, and a legend.
func (p Plot) WriteSVG(w io.Writer) error {
	if len(p.Series) == 0 {
		return errors.New("plot: no series")
	}
	W, H := p.Width, p.Height
	if W <= 0 || H <= 0 {
		W, H = 640, 400
	}
	const left, right, top, bottom = 70.0, 20.0, 40.0, 55.0
	var xmax, ymax float64
	for _, s := range p.Series {
		if len(s.X) != len(s.Y) || (s.Lo != nil && len(s.Lo) != len(s.X)) || (s.Hi != nil && len(s.Hi) != len(s.X)) {
			return fmt.Errorf("plot: series %q: X, Y, Lo and Hi differ in length", s.Name)
		}
		for i := range s.X {
			xmax = math.Max(xmax, s.X[i])
			ymax = math.Max(ymax, s.Y[i])
			if s.Hi != nil {
				ymax = math.Max(ymax, s.Hi[i])
			}
		}
	}
	xstep, xtop := niceAxis(xmax)
	ystep, ytop := niceAxis(ymax)
	pw, ph := float64(W)-left-right, float64(H)-top-bottom
	px := func(x float64) float64 { return left + x/xtop*pw }
	py := func(y float64) float64 { return top + ph - y/ytop*ph }

	b := bufio.NewWriter(w)
	f := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	f(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	f(`<text x="%g" y="22" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", left+pw/2, html.EscapeString(p.Title))
	// Grid and ticks.
	f(`<g class="axes" stroke="#000" stroke-width="1">` + "\n")
	f(`<line x1="%g" y1="%g" x2="%g" y2="%g"/>`+"\n", left, top+ph, left+pw, top+ph)
	f(`<line x1="%g" y1="%g" x2="%g" y2="%g"/>`+"\n", left, top, left, top+ph)
	f("</g>\n")
	f(`<g class="ticks" fill="#000">` + "\n")
	for x := 0.0; x <= xtop+xstep/2; x += xstep {
		f(`<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#000"/>`+"\n", px(x), top+ph, px(x), top+ph+5)
		f(`<text x="%.1f" y="%g" text-anchor="middle">%s</text>`+"\n", px(x), top+ph+18, fmtTick(x))
	}
	for y := 0.0; y <= ytop+ystep/2; y += ystep {
		f(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", left, py(y), left+pw, py(y))
		f(`<text x="%g" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(y)+4, fmtTick(y))
	}
	f("</g>\n")
	p.writeBands(f, px, top, ph, left+pw)
	f(`<text class="xlabel" x="%g" y="%d" text-anchor="middle">%s</text>`+"\n", left+pw/2, H-12, html.EscapeString(p.XLabel))
	f(`<text class="ylabel" x="16" y="%g" text-anchor="middle" transform="rotate(-90 16 %g)">%s</text>`+"\n", top+ph/2, top+ph/2, html.EscapeString(p.YLabel))
	// Series.
	for i, s := range p.Series {
		col := palette[i%len(palette)]
		f(`<g class="series" stroke="%s" fill="%s">`+"\n", col, col)
		f(`<polyline fill="none" stroke-width="2" points="`)
		for k := range s.X {
			if k > 0 {
				f(" ")
			}
			f("%.1f,%.1f", px(s.X[k]), py(s.Y[k]))
		}
		f(`"><title>%s</title></polyline>`+"\n", html.EscapeString(s.Name))
		for k := range s.X {
			if s.Lo != nil && s.Hi != nil {
				f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke-width="1"/>`+"\n", px(s.X[k]), py(s.Lo[k]), px(s.X[k]), py(s.Hi[k]))
			}
			f(`<circle cx="%.1f" cy="%.1f" r="3"/>`+"\n", px(s.X[k]), py(s.Y[k]))
		}
		// Legend entry.
		ly := top + 8 + float64(i)*18
		f(`<line x1="%g" y1="%g" x2="%g" y2="%g" stroke-width="2"/>`+"\n", left+12, ly, left+36, ly)
		f(`<text x="%g" y="%g" stroke="none" fill="#000">%s</text>`+"\n", left+42, ly+4, html.EscapeString(s.Name))
		f("</g>\n")
	}
	f("</svg>\n")
	return b.Flush()
}

// writeBands shades every band between the axes, one colour per band name,
// with a legend entry per name below those of the series.
func (p Plot) writeBands(f func(string, ...any), px func(float64) float64, top, ph, xend float64) {
	if len(p.Bands) == 0 {
		return
	}
	var names []string
	f(`<g class="bands" stroke="none">` + "\n")
	for _, bd := range p.Bands {
		k := -1
		for i, n := range names {
			if n == bd.Name {
				k = i
			}
		}
		if k < 0 {
			names = append(names, bd.Name)
			k = len(names) - 1
		}
		x0, x1 := math.Max(px(bd.From), px(0)), math.Min(px(bd.To), xend)
		if x1 <= x0 {
			continue
		}
		f(`<rect x="%.1f" y="%g" width="%.1f" height="%g" fill="%s" fill-opacity="0.25"><title>%s</title></rect>`+"\n",
			x0, top, x1-x0, ph, bandPalette[k%len(bandPalette)], html.EscapeString(bd.Name))
	}
	// Legend entries below the series' entries.
	left := px(0)
	for k, n := range names {
		ly := top + 8 + float64(len(p.Series)+k)*18
		f(`<rect x="%g" y="%g" width="24" height="10" fill="%s" fill-opacity="0.4"/>`+"\n", left+12, ly-5, bandPalette[k%len(bandPalette)])
		f(`<text x="%g" y="%g" fill="#000">%s</text>`+"\n", left+42, ly+4, html.EscapeString(n))
	}
	f("</g>\n")
}

// niceAxis returns a tick step of 1, 2 or 5 × 10^k giving about five ticks
// and the axis end (a multiple of the step at or above max).
func niceAxis(max float64) (step, top float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return 1, 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return step, math.Ceil(max/step-1e-9) * step
}

func fmtTick(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}
