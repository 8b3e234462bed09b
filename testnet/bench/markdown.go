package bench

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteMarkdown writes results.md: the machine, the testnet, one section
// per experiment with its plot and a table of medians, and extra (free
// Markdown, e.g. Go benchmark figures and profile notes) at the end.
func (res *Results) WriteMarkdown(w io.Writer, plots map[string]Plot, extra string) error {
	b := bufio.NewWriter(w)
	f := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	m := res.Machine
	f("# bedwe bench results\n\n")
	f("Produced by `bedwe bench` (package testnet/bench) on %s, in %s.\n\n", res.Started.Format("2006-01-02 15:04 UTC"), res.Ended.Sub(res.Started).Round(time.Second))
	f("| machine | |\n|---|---|\n")
	f("| CPU | %s × %d |\n| memory | %d MiB |\n| kernel | Linux %s (%s) |\n| Go | %s |\n", m.Model, m.CPUs, m.MemoryMiB, m.Kernel, m.GOARCH, m.GoVersion)
	f("| load average (1/5/15 min) | %s at start, %s at the end |\n", m.LoadAvg, res.LoadAvgAtFinish)
	f("| testnet | %d `bedwe node` processes on 127.0.0.1, %d zones, TCP |\n", res.Nodes, res.Zones)
	f("| repeats | %d per point (median, with min–max) |\n\n", res.Config.Repeat)
	f("The machine is shared: every node, the client and any other work compete for %d cores, so absolute times are an upper bound of what the engine needs; the per-hop figures are the ones to compare.\n\n", m.CPUs)
	f("Modes: **noop** runs the echo builtin (the makespan is engine overhead alone); **sleep%dms** runs the sleep builtin for %s per service, so the critical path sets a floor (`floor_ms`). `per_hop_ms` = (median − floor) / services on the critical path.\n\n",
		res.Config.ServiceTime.Milliseconds(), res.Config.ServiceTime)

	points := func(title, name, xname string, ps []Point, note string) {
		if len(ps) == 0 {
			return
		}
		f("## %s\n\n", title)
		if note != "" {
			f("%s\n\n", note)
		}
		if _, ok := plots[name]; ok {
			f("![%s](%s.svg)\n\n", title, name)
		}
		f("| mode | %s | services | critical path | median s | min s | max s | floor s | per hop ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", xname)
		for _, p := range ps {
			f("| %s | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.1f |\n", p.Mode, p.X, p.Services, p.CriticalPath,
				p.Median.Seconds(), p.Min.Seconds(), p.Max.Seconds(), p.Floor.Seconds(), ms(p.PerHop()))
		}
		f("\nData: [%s.csv](%s.csv).\n\n", name, name)
	}
	points("Sequential workflows (paper Fig. 9)", ExpSequential, "n", res.Sequential, "")
	points("One FORK of parallel branches (paper Fig. 10)", ExpParallel, "branches", res.Parallel,
		fmt.Sprintf("One `FORK(...) SYNC` of b branches, each a sequence of %d services.", res.Config.ParallelLength))
	points("Nested FORKs (paper Fig. 11)", ExpNested, "nested FORKs", res.Nested,
		fmt.Sprintf("%d services in a complete binary tree of d nested two-way FORKs: 2^d innermost branches of ⌊%d/2^d⌋ services; "+
			"the remainder runs as isolated services, one in front of each of the first FORKs in breadth-first order (between a FORK and the FORK it contains). "+
			"For 100 services: d=1 2×50, d=2 4×25, d=3 8×12+4, d=4 16×6+4, d=5 32×3+4.", res.Config.NestedTotal, res.Config.NestedTotal))

	if len(res.Overhead) > 0 {
		f("## Per-hop overhead\n\n")
		f("No-op sequences; gaps are read from the origin's trace (one clock for every node on a testnet): `gap` is one step's end to the next step's start — the whole hand-off (peel, encode, peer choice, stream, journal write, ack, executor start). `in step` is End − Start of a step (the echo builtin plus the executor around it).\n\n")
		f("| services | makespan median s | per service ms | gap median ms | gap p90 ms | gap max ms | in step ms | submit→first start ms | last end→done ms |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, o := range res.Overhead {
			f("| %d | %.3f | %.1f | %.1f | %.1f | %.1f | %.3f | %.1f | %.1f |\n", o.N, o.Makespan.Median.Seconds(), ms(o.PerService),
				ms(o.GapMedian), ms(o.GapP90), ms(o.GapMax), ms(o.Service), ms(o.StartDelay), ms(o.FinishDelay))
		}
		if fl := res.Floor; fl.Hop() > 0 {
			f("\nFloor, measured in the same run (median of %d each): a 4 KiB write+fsync beside the journals %.2f ms, a libp2p ping round trip to a node %.2f ms; one of each %.2f ms. The target for the gap median is 3 × that: %.2f ms.\n", FloorSamples,
				ms(fl.Fsync4K), ms(fl.StreamRTT), ms(fl.Hop()), 3*ms(fl.Hop()))
			if fl.Commit4K > 0 {
				f("A journal commit of 4 KiB (two fdatasyncs in bbolt) took %.2f ms; a hand-over's critical path holds three of them one after the other and two and a half round trips, %.2f ms at the floor (docs/benchmarks.md).\n",
					ms(fl.Commit4K), ms(fl.HandOver()))
			}
		}
		f("\nData: [overhead.csv](overhead.csv).\n\n")
	}
	if len(res.Packs) > 0 {
		f("## Pack size along a sequence\n\n")
		f("Estimated in-process with `pack.Encode` on the packs a node builds along a no-op sequence of %d (the echo output of every earlier step travels on; see `bench.PackGrowth`). Every hand-off sends and journals the whole pack.\n\n", len(res.Packs))
		if _, ok := plots["packsize"]; ok {
			f("![pack size](packsize.svg)\n\n")
		}
		f("| hop | outputs | trace entries | data bytes | pack bytes |\n|---:|---:|---:|---:|---:|\n")
		total := 0
		for _, p := range res.Packs {
			total += p.Bytes
		}
		for _, p := range res.Packs {
			if p.Hop == 1 || p.Hop%max(len(res.Packs)/8, 1) == 0 || p.Hop == len(res.Packs) {
				f("| %d | %d | %d | %d | %d |\n", p.Hop, p.Outputs, p.Trace, p.DataBytes, p.Bytes)
			}
		}
		f("\nSum over all %d hand-offs: %.1f MiB sent and journaled. Data: [packsize.csv](packsize.csv).\n\n", len(res.Packs), float64(total)/(1<<20))
	}
	if rows := res.PacksReadsNothing; len(rows) > 0 {
		f("The same sequence with `reads=()` on every step, handed on by nodes with the default `--stash-min` (outputs and trace entries nobody ahead reads leave the pack once they weigh that much; `bench.PackGrowthReadsNothing`):\n\n")
		f("| hop | outputs | trace entries | data bytes | pack bytes |\n|---:|---:|---:|---:|---:|\n")
		total := 0
		for _, p := range rows {
			total += p.Bytes
		}
		for _, p := range rows {
			if p.Hop == 1 || p.Hop%max(len(rows)/8, 1) == 0 || p.Hop == len(rows) {
				f("| %d | %d | %d | %d | %d |\n", p.Hop, p.Outputs, p.Trace, p.DataBytes, p.Bytes)
			}
		}
		f("\nSum over all %d hand-offs: %.2f MiB sent and journaled.\n\n", len(rows), float64(total)/(1<<20))
	}
	if len(res.Resources) > 0 {
		f("## Node resources\n\n")
		f("Every node's VmRSS (/proc/PID/status) sampled twice a second and its CPU time (utime+stime, /proc/PID/stat) over the window; CPU in percent of one core.\n\n")
		f("| phase | window s | nodes | RSS mean MiB | RSS max MiB | threads | CPU all nodes %% | CPU per node %% | CPU max node %% | workflows | load |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, r := range res.Resources {
			f("| %s | %.1f | %d | %.1f | %.1f | %.0f | %.1f | %.2f | %.2f | %d | %s |\n", r.Phase, r.Window.Seconds(), r.Nodes, r.RSSMeanMB, r.RSSMaxMB, r.ThreadsMean,
				r.CPUTotalPct, r.CPUMeanPct, r.CPUMaxPct, r.Workflows, r.LoadDesc)
		}
		f("\nData: [resources.csv](resources.csv).\n\n")
	}
	if len(res.Wfcommons) > 0 {
		f("## Real scientific workflows (WfCommons)\n\n")
		f("Each instance converted by `grammar/wfcommons` (series-parallel DAGs exactly, others with added dependencies), runtimes × %g as `wf.*` sleep services. `bound` is the critical path of the converted workflow with the sleeps it runs: no engine finishes sooner. `ratio` = median makespan / bound; `per path service` = (median − bound) / services on that path.\n\n", res.Config.WfcommonsScale)
		f("| instance | tasks | edges | added edges | SP | critical path s (unscaled) | growth %% | bound s | path services | median s | min s | max s | ratio | per path service ms |\n|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range res.Wfcommons {
			per := 0.0
			if r.PathServices > 0 {
				per = ms((r.Median - r.Bound) / time.Duration(r.PathServices))
			}
			f("| %s | %d | %d | %d | %v | %.1f | %.1f | %.3f | %d | %.3f | %.3f | %.3f | %.2f | %.1f |\n", r.Instance, r.Tasks, r.Edges, r.AddedEdges, r.SeriesParallel,
				r.CriticalPath.Seconds(), 100*r.Growth, r.Bound.Seconds(), r.PathServices, r.Median.Seconds(), r.Min.Seconds(), r.Max.Seconds(), r.Ratio(), per)
		}
		f("\nData: [wfcommons.csv](wfcommons.csv).\n\n")
	}
	if extra = strings.TrimSpace(extra); extra != "" {
		f("%s\n", extra)
	}
	return b.Flush()
}
