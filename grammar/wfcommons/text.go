package wfcommons

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/bedwe/bedwe/grammar"
)

// Summary is a one-line account of a conversion, e.g.
// "103 tasks, 231 edges, series-parallel: no, added 6 edges, critical path 21.1s -> 21.9s (+3.8%)".
func (r *Result) Summary() string {
	sp := "yes"
	if !r.SeriesParallel {
		sp = "no"
	}
	return fmt.Sprintf("%d tasks, %d edges, series-parallel: %s, added %d edges (%d order pairs), critical path %s -> %s (%+.1f%%)",
		r.Tasks, r.Edges, sp, r.AddedEdges, r.AddedPairs,
		seconds3(r.CriticalPath), seconds3(r.ConvertedCriticalPath), 100*r.Growth())
}

// WriteText writes the workflow as source text: a '#' comment header naming
// the source and the conversion's figures, then the workflow in the
// canonical layout of grammar.Format. source is how the header names the
// input (a file name).
func WriteText(w io.Writer, r *Result, source string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Imported from WfCommons instance %s", source)
	if r.Name != "" {
		fmt.Fprintf(&b, " (%q", r.Name)
		if r.SchemaVersion != "" {
			fmt.Fprintf(&b, ", WfFormat %s", r.SchemaVersion)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "# %d tasks, %d edges (%d transitive, dropped), %d added edges (%d order pairs)\n",
		r.Tasks, r.Edges, r.TransitiveEdges, r.AddedEdges, r.AddedPairs)
	sp := "exact: the instance is series-parallel"
	if !r.SeriesParallel {
		sp = "not series-parallel: dependencies were added"
	}
	fmt.Fprintf(&b, "# critical path %s -> %s (%+.1f%%), %s\n",
		seconds3(r.CriticalPath), seconds3(r.ConvertedCriticalPath), 100*r.Growth(), sp)
	fmt.Fprintf(&b, "# expect= is the recorded runtime x %g\n", r.Scale)
	b.WriteString(grammar.Format(r.Workflow))
	_, err := io.WriteString(w, b.String())
	return err
}

// seconds3 prints a duration as seconds with at most three decimals.
func seconds3(d time.Duration) string {
	return strconv.FormatFloat(math.Round(d.Seconds()*1000)/1000, 'f', -1, 64) + "s"
}
