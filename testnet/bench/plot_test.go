package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// svgElements decodes an SVG document and returns its elements by name,
// failing the test if it is not well-formed XML.
func svgElements(t *testing.T, doc []byte) (map[string][]xml.StartElement, []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	els := map[string][]xml.StartElement{}
	var texts []string
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			els[tok.Name.Local] = append(els[tok.Name.Local], tok.Copy())
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return els, texts
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func TestPlotSVG(t *testing.T) {
	p := Plot{
		Title: "Sequential <workflows>", XLabel: "services in sequence", YLabel: "completion time (s)",
		Series: []Series{
			{Name: "noop", X: []float64{5, 10, 200}, Y: []float64{0.1, 0.2, 4}, Lo: []float64{0.09, 0.18, 3.5}, Hi: []float64{0.12, 0.25, 4.4}},
			{Name: "sleep100ms", X: []float64{5, 10, 200}, Y: []float64{0.6, 1.2, 24}},
		},
	}
	var buf bytes.Buffer
	if err := p.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	els, texts := svgElements(t, buf.Bytes())
	if got := len(els["polyline"]); got != 2 {
		t.Errorf("%d polylines, want one per series (2)", got)
	}
	for i, pl := range els["polyline"] {
		if pts := strings.Fields(attr(pl, "points")); len(pts) != 3 {
			t.Errorf("polyline %d has %d points, want 3", i, len(pts))
		}
	}
	if got := len(els["circle"]); got != 6 {
		t.Errorf("%d point markers, want 6", got)
	}
	joined := strings.Join(texts, "|")
	for _, want := range []string{"services in sequence", "completion time (s)", "Sequential <workflows>", "noop", "sleep100ms", "0", "200", "25"} {
		if !strings.Contains("|"+joined+"|", "|"+want+"|") {
			t.Errorf("SVG text lacks %q (texts: %s)", want, joined)
		}
	}
	// The axes: a horizontal and a vertical line inside the axes group.
	axes := 0
	for _, g := range els["g"] {
		if attr(g, "class") == "axes" {
			axes++
		}
	}
	if axes != 1 {
		t.Errorf("%d axes groups, want 1", axes)
	}
}

func TestPlotErrors(t *testing.T) {
	for name, p := range map[string]Plot{
		"no series":  {},
		"bad length": {Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1}}}},
		"bad range":  {Series: []Series{{Name: "a", X: []float64{1}, Y: []float64{1}, Lo: []float64{1, 2}, Hi: []float64{1}}}},
	} {
		if err := p.WriteSVG(io.Discard); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestNiceAxis(t *testing.T) {
	for _, tc := range []struct{ max, step, top float64 }{
		{200, 50, 200}, {24, 5, 25}, {4.4, 1, 5}, {0.37, 0.1, 0.4}, {0, 1, 1}, {1, 0.2, 1},
	} {
		step, top := niceAxis(tc.max)
		if !near(step, tc.step) || !near(top, tc.top) {
			t.Errorf("niceAxis(%v) = %v, %v; want %v, %v", tc.max, step, top, tc.step, tc.top)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestPlotBands checks that bands are shaded inside the axes, one legend
// entry per band name.
func TestPlotBands(t *testing.T) {
	p := Plot{Title: "t", XLabel: "x", YLabel: "y",
		Series: []Series{{Name: "a", X: []float64{0, 10}, Y: []float64{0, 5}}},
		Bands:  []Band{{Name: "north dark", From: 2, To: 4}, {Name: "south dark", From: 5, To: 7}, {Name: "north dark", From: 8, To: 20}},
	}
	var b bytes.Buffer
	if err := p.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	els, texts := svgElements(t, b.Bytes())
	shaded := 0
	for _, r := range els["rect"] {
		if attr(r, "fill-opacity") == "0.25" {
			shaded++
		}
	}
	if shaded != 3 {
		t.Errorf("%d shaded bands, want 3", shaded)
	}
	legend := map[string]int{}
	for _, s := range texts {
		legend[s]++
	}
	// Each name appears once in the legend and once per band as a <title>.
	if legend["north dark"] != 3 || legend["south dark"] != 2 {
		t.Errorf("legend texts %v", legend)
	}
}
