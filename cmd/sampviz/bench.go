package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cuda"
)

func init() {
	commands["bench"] = command{summary: "time the CUDA kernels against the device's copy bandwidth", run: runBench}
}

// benchTarget is a performance goal for a case (issue 3's, and issue 30's
// 12 us at B=1 and 2.5x the floor for the unfiltered paths).
type benchTarget struct {
	// MaxFloor is the largest allowed median / floor (0: none).
	MaxFloor float64
	// MaxTime is the largest allowed median (0: none).
	MaxTime time.Duration
}

func (t benchTarget) String() string {
	switch {
	case t.MaxFloor > 0:
		return fmt.Sprintf("<= %.1fx floor", t.MaxFloor)
	case t.MaxTime > 0:
		return fmt.Sprintf("< %d us", t.MaxTime.Microseconds())
	}
	return ""
}

func (t benchTarget) met(r *cuda.BenchResult) bool {
	if t.MaxFloor > 0 && float64(r.Median) > t.MaxFloor*float64(r.Floor()) {
		return false
	}
	return t.MaxTime == 0 || r.Median < t.MaxTime
}

type benchEntry struct {
	name   string
	c      cuda.BenchCase
	target benchTarget
}

// benchCases are the shapes of issue 3's targets (bf16 logits; Llama-3's
// and Qwen2's vocabularies), plus a few to compare against.
func benchCases(quick bool) []benchEntry {
	const llama, qwen = 128256, 151936
	bf := engine.BF16
	floor13 := benchTarget{MaxFloor: 1.3}
	floor2 := benchTarget{MaxFloor: 2}
	floor25 := benchTarget{MaxFloor: 2.5}
	b1 := benchTarget{MaxTime: 12 * time.Microsecond}
	filt := func(c cuda.BenchCase) cuda.BenchCase {
		c.Temperature, c.TopK, c.TopP = 0.7, 50, 0.9
		return c
	}
	withMethod := func(c cuda.BenchCase, m engine.SampleMethod) cuda.BenchCase {
		c.Method = m
		return c
	}
	// Issue 28's tree: N = 64 nodes (breadth first, topk children a node),
	// one-hot drafts unless q.
	tree := func(rows, topk int, q bool) cuda.BenchCase {
		return cuda.BenchCase{Op: engine.OpSpecTreeVerify, DType: bf, Rows: rows, Vocab: llama, Nodes: 64, TreeTopK: topk,
			Temperature: 1, DraftProbs: q}
	}
	b1tree := benchTarget{MaxTime: 20 * time.Microsecond}
	// counted times a many-draws case in fewer launches: each takes tens
	// of milliseconds.
	counted := func(c cuda.BenchCase) cuda.BenchCase {
		if c.Draws >= 1_000_000 {
			c.Iters, c.Warmup = 10, 2
		}
		return c
	}
	cases := []benchEntry{
		{"argmax", cuda.BenchCase{Op: engine.OpArgmax, DType: bf, Rows: 1, Vocab: llama}, b1},
		{"argmax", cuda.BenchCase{Op: engine.OpArgmax, DType: bf, Rows: 128, Vocab: llama}, floor13},
		{"argmax", cuda.BenchCase{Op: engine.OpArgmax, DType: bf, Rows: 512, Vocab: llama}, floor13},
		{"argmax", cuda.BenchCase{Op: engine.OpArgmax, DType: bf, Rows: 128, Vocab: qwen}, floor13},
		{"softmax", cuda.BenchCase{Op: engine.OpSoftmax, DType: bf, Rows: 1, Vocab: llama, Temperature: 0.7}, b1},
		{"softmax", cuda.BenchCase{Op: engine.OpSoftmax, DType: bf, Rows: 128, Vocab: llama, Temperature: 0.7}, floor13},
		{"softmax", cuda.BenchCase{Op: engine.OpSoftmax, DType: bf, Rows: 512, Vocab: llama, Temperature: 0.7}, floor13},
		{"softmax", cuda.BenchCase{Op: engine.OpSoftmax, DType: bf, Rows: 128, Vocab: qwen, Temperature: 0.7}, floor13},
		{"softmax f32", cuda.BenchCase{Op: engine.OpSoftmax, DType: engine.F32, Rows: 128, Vocab: llama, Temperature: 0.7}, benchTarget{}},
		{"renorm k50 p0.9", filt(cuda.BenchCase{Op: engine.OpRenorm, DType: bf, Rows: 1, Vocab: llama}), b1},
		{"renorm k50 p0.9", filt(cuda.BenchCase{Op: engine.OpRenorm, DType: bf, Rows: 128, Vocab: llama}), benchTarget{}},
		{"renorm p0.9 (no top-k)", cuda.BenchCase{Op: engine.OpRenorm, DType: bf, Rows: 128, Vocab: llama, Temperature: 0.7, TopP: 0.9}, benchTarget{}},
		{"sample k50 p0.9", filt(cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 1, Vocab: llama}), b1},
		{"sample k50 p0.9", filt(cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 512, Vocab: llama}), floor2},
		{"sample k50 p0.9 rejection", withMethod(filt(cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 512, Vocab: llama}), engine.SampleRejection), floor25},
		{"sample k1000 p0.9", cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 512, Vocab: llama, Temperature: 0.7, TopK: 1000, TopP: 0.9}, benchTarget{}},
		{"sample p0.9 (no top-k)", cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 512, Vocab: llama, Temperature: 0.7, TopP: 0.9}, floor25},
		{"sample p0.9 (no top-k)", cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 1, Vocab: llama, Temperature: 0.7, TopP: 0.9}, b1},
		{"sample p0.9 (no top-k)", cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 64, Vocab: llama, Temperature: 0.7, TopP: 0.9}, benchTarget{}},
		{"sample plain", cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 512, Vocab: llama, Temperature: 1}, floor25},
		{"sample gumbel", cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 512, Vocab: llama, Temperature: 1, Method: engine.SampleGumbel}, floor25},
		// Many draws counted on the device (issue 30): the whole
		// sample-with-counts launch, against the floor of a draw.
		{"sample counts", counted(cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 512, Vocab: llama, Temperature: 1, Draws: 10_000_000}), benchTarget{MaxTime: 100 * time.Millisecond}},
		{"sample counts", counted(cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 512, Vocab: llama, Temperature: 1, Draws: 100_000}), benchTarget{}},
		{"sample counts k50 p0.9", counted(filt(cuda.BenchCase{Op: engine.OpSample, DType: bf, Rows: 64, Vocab: llama, Draws: 10_000_000})), benchTarget{}},
		{"spec_verify", cuda.BenchCase{Op: engine.OpSpecVerify, DType: bf, Rows: 1, Vocab: llama, K: 8, Temperature: 1}, b1},
		{"spec_verify", cuda.BenchCase{Op: engine.OpSpecVerify, DType: bf, Rows: 128, Vocab: llama, K: 8, Temperature: 1}, floor2},
		{"spec_verify q", cuda.BenchCase{Op: engine.OpSpecVerify, DType: bf, Rows: 128, Vocab: llama, K: 8, Temperature: 1, DraftProbs: true}, floor25},
		{"spec_verify k50 p0.9", filt(cuda.BenchCase{Op: engine.OpSpecVerify, DType: bf, Rows: 1, Vocab: llama, K: 8}), b1},
		{"spec_verify k50 p0.9", filt(cuda.BenchCase{Op: engine.OpSpecVerify, DType: bf, Rows: 128, Vocab: llama, K: 8}), floor2},
		{"spec_verify k50 p0.9 q", filt(cuda.BenchCase{Op: engine.OpSpecVerify, DType: bf, Rows: 128, Vocab: llama, K: 8, DraftProbs: true}), benchTarget{}},
		{"spec_tree_verify topk2", tree(1, 2, false), b1tree},
		{"spec_tree_verify topk4", tree(1, 4, false), b1tree},
		{"spec_tree_verify topk2", tree(64, 2, false), floor2},
		{"spec_tree_verify topk4", tree(64, 4, false), floor2},
		{"spec_tree_verify topk4 q", tree(64, 4, true), benchTarget{}},
		{"spec_tree_verify topk4 k50 p0.9", filt(tree(64, 4, false)), benchTarget{}},
		{"ngram_match", cuda.BenchCase{Op: engine.OpNgramMatch, DType: engine.F32, Rows: 1, PromptLen: 4096, GenLen: 512}, b1},
		{"ngram_match", cuda.BenchCase{Op: engine.OpNgramMatch, DType: engine.F32, Rows: 128, PromptLen: 4096, GenLen: 512}, benchTarget{}},
		// Issue 26: FastDeploy's rules at its shapes (input_ids and pre_ids
		// both of the sequence's length); the targets are FastDeploy's own
		// ngram_match GPU kernel on an H20, 21 us at B=32, L=512 and 162 us
		// at B=256, L=131072, which the hybrid is held to as well.
		{"ngram_match fastdeploy", fastDeployNgram(engine.NgramFastDeploy, 1, 512), b1},
		{"ngram_match fastdeploy", fastDeployNgram(engine.NgramFastDeploy, 32, 512), benchTarget{MaxTime: 21 * time.Microsecond}},
		{"ngram_match fastdeploy", fastDeployNgram(engine.NgramFastDeploy, 256, 131072), benchTarget{MaxTime: 162 * time.Microsecond}},
		{"ngram_match fastdeploy_hybrid", fastDeployNgram(engine.NgramFastDeployHybrid, 32, 512), benchTarget{MaxTime: 21 * time.Microsecond}},
		{"ngram_match fastdeploy_hybrid", fastDeployNgram(engine.NgramFastDeployHybrid, 256, 131072), benchTarget{MaxTime: 162 * time.Microsecond}},
	}
	if quick {
		for i := range cases {
			cases[i].c.Iters, cases[i].c.Warmup = 10, 2
		}
	}
	return cases
}

// fastDeployNgram is an ngram_match case under FastDeploy's rule sem: rows
// rows whose prompt and generated tokens are both seq long.
func fastDeployNgram(sem engine.NgramSemantics, rows, seq int) cuda.BenchCase {
	return cuda.BenchCase{Op: engine.OpNgramMatch, DType: engine.F32, Rows: rows, PromptLen: seq, GenLen: seq, NgramSemantics: sem}
}

// benchRow is one line of the report (and of --json).
// minXFloor is the smallest floor whose ratio the table shows: an empty
// kernel takes about 4 us between the bench's events on an H100
// (docs/PERF.md, csrc/dev/bwprobe.cu), so below a few microseconds "x floor"
// measures the launch, not the kernel.
const minXFloor = 5 * time.Microsecond

type benchRow struct {
	Name   string            `json:"name"`
	Result *cuda.BenchResult `json:"result"`
	// Ratio is the achieved bandwidth over the copy bandwidth.
	Ratio float64 `json:"ratio_to_copy"`
	// FloorNS is Bytes at the copy bandwidth; XFloor the median over it,
	// 0 (absent, "-" in the table) where the floor is under minXFloor: a
	// launch alone takes longer, so the ratio would say nothing.
	FloorNS int64   `json:"floor_ns"`
	XFloor  float64 `json:"x_floor,omitempty"`
	Target  string  `json:"target,omitempty"`
	Met     *bool   `json:"met,omitempty"`
	// Peers are python/peers.py's times of the case on the same inputs
	// (`--peers`), each with its speedup (peer median / ours).
	Peers []peerTime `json:"peers,omitempty"`
}

// newBenchRow is the table's row for one measured case.
func newBenchRow(name string, target benchTarget, r *cuda.BenchResult) benchRow {
	row := benchRow{Name: name, Result: r, Ratio: r.Ratio(), FloorNS: r.Floor().Nanoseconds(), Target: target.String()}
	if r.Floor() >= minXFloor {
		row.XFloor = float64(r.Median) / float64(r.Floor())
	}
	if row.Target != "" {
		met := target.met(r)
		row.Met = &met
	}
	return row
}

type benchReport struct {
	Device        engine.Device `json:"device"`
	Date          string        `json:"date"`
	CopyBandwidth float64       `json:"copy_bandwidth"`
	Rows          []benchRow    `json:"rows"`
	// Peers is the peer script's hello when `--peers` ran it; PeersOff
	// says why the peers did not run, or stopped.
	Peers    *peerHello `json:"peers,omitempty"`
	PeersOff string     `json:"peers_off,omitempty"`
}

func runBench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	kernels := fs.String("kernels", "", "path of "+kernelLibrary+" (default: $SAMPVIZ_KERNELS, next to sampviz, ./build)")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	only := fs.String("ops", "", "comma-separated ops to run (default: all)")
	quick := fs.Bool("quick", false, "10 timed launches per case instead of 100")
	match := fs.String("match", "", "run only the cases whose name and shape contain this text (or one of its |-separated alternatives)")
	peersOn := fs.Bool("peers", false, "also time python/peers.py's torch, torch.compile and Triton peers on the same inputs (needs python3 with torch; Triton optional)")
	python := fs.String("python", envOr("SAMPVIZ_PYTHON", "python3"), "the python that runs the peers (default: $SAMPVIZ_PYTHON, else python3)")
	peerScript := fs.String("peers-script", "", "path of peers.py (default: python/peers.py here or beside the executable's folder)")
	var gpu gpuNumber
	fs.Var(&gpu, "gpu", "the GPU to benchmark, as CUDA numbers them (default 0)")
	if err := fs.Parse(args); err != nil {
		return exitUnusable
	}
	path, err := findKernels(*kernels)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sampviz bench:", err)
		return exitUnusable
	}
	ctx := context.Background()
	b, err := cuda.Open(ctx, cuda.Options{Kernels: path, Reason: "sampviz bench", Stderr: os.Stderr, Device: int(gpu)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sampviz bench:", err)
		return exitUnusable
	}
	defer b.Close()
	bw, err := b.CopyBandwidth(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sampviz bench:", err)
		return exitViolated
	}
	rep := benchReport{Device: b.Device(), Date: time.Now().UTC().Format("2006-01-02"), CopyBandwidth: bw}
	fmt.Printf("device: %s, %d SMs, %.1f GiB; copy bandwidth %.0f GB/s (read + write)\n",
		rep.Device.Name, rep.Device.SMs, float64(rep.Device.MemoryBytes)/(1<<30), bw/1e9)
	want := map[string]bool{}
	for _, op := range strings.Split(*only, ",") {
		if op = strings.TrimSpace(op); op != "" {
			want[op] = true
		}
	}
	var peers *peerSession
	inputsDir := ""
	if *peersOn {
		peers, inputsDir, err = openPeers(*python, *peerScript)
		if err != nil {
			rep.PeersOff = strings.TrimPrefix(err.Error(), errPeersOff.Error()+": ")
			fmt.Fprintf(os.Stderr, "sampviz bench: peers: %s; timing ours alone\n", rep.PeersOff)
		} else {
			defer os.RemoveAll(inputsDir)
			defer peers.Close()
			defer closePeersOnSignal(peers, inputsDir)()
			rep.Peers = &peers.Hello
			fmt.Println(peersLine(rep.Peers))
		}
	}
	failed := false
	for i, e := range benchCases(*quick) {
		if len(want) > 0 && !want[string(e.c.Op)] || !matchCase(e.name+" "+shape(e.c), *match) {
			continue
		}
		c := e.c
		if peers != nil && peerCase(c) {
			c.Inputs = filepath.Join(inputsDir, fmt.Sprintf("case%02d.safetensors", i))
		}
		r, err := b.Bench(ctx, c)
		if err != nil && c.Inputs != "" {
			fmt.Fprintf(os.Stderr, "sampviz bench: %s %s: with its inputs written for the peers: %v; again without\n", e.name, shape(e.c), err)
			os.Remove(c.Inputs)
			c.Inputs = ""
			r, err = b.Bench(ctx, c)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "sampviz bench: %s %s: %v\n", e.name, shape(e.c), err)
			failed = true
			continue
		}
		r.CopyBandwidth = bw // the same run's measurement
		if r.Median > 0 {
			r.Bandwidth = float64(r.Bytes) / r.Median.Seconds()
		}
		row := newBenchRow(e.name, e.target, r)
		fmt.Fprintf(os.Stderr, "  %-16s %-28s %9.1f us\n", e.name, shape(e.c), float64(r.Median.Nanoseconds())/1e3)
		if c.Inputs != "" {
			pr, err := peers.Time(peerRequest{Name: e.name, Shape: shape(e.c), Case: c, Inputs: c.Inputs,
				Iters: r.Iters, Warmup: r.Warmup})
			os.Remove(c.Inputs)
			if err != nil {
				rep.PeersOff = fmt.Sprintf("%s %s: %v; the later cases ran ours alone", e.name, shape(e.c), err)
				fmt.Fprintln(os.Stderr, "sampviz bench: peers:", rep.PeersOff)
				peers.Close()
				peers = nil
			} else if pr.Error != "" {
				fmt.Fprintf(os.Stderr, "sampviz bench: peers of %s %s: %s\n", e.name, shape(e.c), pr.Error)
				row.Peers = []peerTime{{Peer: peerLabels[0], Error: "python/peers.py: " + pr.Error}}
			} else {
				row.Peers = withSpeedups(pr.Peers, r.Median)
				for _, p := range row.Peers {
					if p.MedianUS > 0 {
						fmt.Fprintf(os.Stderr, "  %-16s %-28s %9.1f us  %s\n", "", p.Peer, p.MedianUS, p.What)
					}
				}
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	printBench(os.Stdout, &rep)
	printPeers(os.Stdout, &rep)
	if *jsonOut != "" {
		data, err := json.MarshalIndent(&rep, "", "  ")
		if err == nil {
			err = os.WriteFile(*jsonOut, append(data, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sampviz bench: write json:", err)
			return exitUnusable
		}
	}
	if failed {
		return exitViolated
	}
	return exitOK
}

// shape formats a case's shape: "bf16 B=128 V=128256 K=8".
func shape(c cuda.BenchCase) string {
	if c.Op == engine.OpNgramMatch {
		return fmt.Sprintf("B=%d L=%d M=%d", c.Rows, c.PromptLen, c.GenLen)
	}
	s := fmt.Sprintf("%s B=%d V=%d", strings.ToLower(c.DType.String()), c.Rows, c.Vocab)
	if c.K > 0 {
		s += fmt.Sprintf(" K=%d", c.K)
	}
	if c.Nodes > 0 {
		s += fmt.Sprintf(" N=%d", c.Nodes)
	}
	if c.Draws > 0 {
		s += " draws=" + engine.DrawsText(c.Draws)
	}
	return s
}

// printBench writes the table: per case the median over the launches (and
// the mean of back-to-back launches, launch gaps included), the
// bytes that must move, the achieved bandwidth, its ratio to the copy
// bandwidth, the floor (bytes at the copy bandwidth) and the target.
func printBench(w io.Writer, rep *benchReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\n%s, %s, copy bandwidth %.0f GB/s\n", rep.Device.Name, rep.Date, rep.CopyBandwidth/1e9)
	fmt.Fprintln(tw, "op\tshape\tmedian us\tb2b us\tMB\tGB/s\tof copy\tfloor us\tx floor\ttarget\t")
	for _, r := range rep.Rows {
		verdict := r.Target
		if r.Met != nil {
			if *r.Met {
				verdict += " met"
			} else {
				verdict += " MISSED"
			}
		}
		xfloor := "-"
		if r.XFloor > 0 {
			xfloor = fmt.Sprintf("%.2f", r.XFloor)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f%%\t%.1f\t%s\t%s\t\n",
			r.Name, shape(r.Result.Case), float64(r.Result.Median.Nanoseconds())/1e3,
			float64(r.Result.BackToBack.Nanoseconds())/1e3, float64(r.Result.Bytes)/1e6,
			r.Result.Bandwidth/1e9, 100*r.Ratio, float64(r.FloorNS)/1e3, xfloor, verdict)
	}
	tw.Flush()
	for _, r := range rep.Rows {
		if line := drawsLine(r); line != "" {
			fmt.Fprintln(w, line)
		}
	}
}

// drawsLine says a many-draws case's draws per second beside the floor of a
// draw (its floor column is the draws' floor, not the bytes'), or "".
func drawsLine(r benchRow) string {
	res := r.Result
	if res.Case.Draws <= 0 || res.DrawsPerSecond <= 0 {
		return ""
	}
	total := float64(res.Case.Rows) * float64(res.Case.Draws)
	line := fmt.Sprintf("%s %s: %.3g draws in %.1f ms (the whole sample-with-counts launch): %.3g draws/s",
		r.Name, shape(res.Case), total, float64(res.Median.Nanoseconds())/1e6, res.DrawsPerSecond)
	if f := res.DrawFloorRate(); f > 0 {
		line += fmt.Sprintf(", %.0f%% of the floor's %.3g draws/s", 100*res.DrawsPerSecond/f, f)
	}
	return line
}

// openPeers finds and starts the peer script and makes the folder for the
// cases' inputs files; the error wraps errPeersOff with the reason.
func openPeers(python, script string) (*peerSession, string, error) {
	script, err := findPeerScript(script)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", errPeersOff, err)
	}
	var args []string
	if extra := os.Getenv("SAMPVIZ_PEERS_FLAGS"); extra != "" {
		args = strings.Fields(extra)
	}
	s, err := startPeers(python, script, args, os.Stderr)
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "sampviz-peers-")
	if err != nil {
		s.Close()
		return nil, "", fmt.Errorf("%w: inputs folder: %v", errPeersOff, err)
	}
	return s, dir, nil
}

// closePeersOnSignal removes the peers' inputs folder (hundreds of MB) and
// kills the peer script when the bench gets SIGINT or SIGTERM, and then
// lets the signal end the process as it would have; the bench's own
// deferred cleanup never runs then, since a case on the GPU may not end
// for minutes. A signal that was ignored when sampviz started (nohup, a
// background job) stays ignored. Calling stop undoes it.
func closePeersOnSignal(peers *peerSession, dir string) (stop func()) {
	var sigs []os.Signal
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !signal.Ignored(sig) {
			sigs = append(sigs, sig)
		}
	}
	if len(sigs) == 0 {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	stopped := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "sampviz bench: %v: removing %s and stopping the peers\n", sig, dir)
			os.RemoveAll(dir)
			peers.Kill()
			signal.Reset(sig)
			if p, err := os.FindProcess(os.Getpid()); err == nil && p.Signal(sig) == nil {
				time.Sleep(time.Second) // the signal's default action ends us
			}
			os.Exit(exitUnusable)
		case <-stopped:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(stopped)
	}
}
