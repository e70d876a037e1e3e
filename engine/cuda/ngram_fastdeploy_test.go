package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/scenarios"
)

// fdRandomRun returns an ngram_match run under sem (fastdeploy or
// fastdeploy_hybrid) of rows rows with fresh random FastDeploy state:
// prompts of up to l tokens over alphabet ids, generated tokens (pre_ids
// [rows, m], the current token at step_idx < m) that copy stretches of the
// prompt so that n-grams match with tokens after them, encoder and
// inactive rows, MTP tokens (hybrid), max_dec_len a few steps past
// step_idx on some rows, and a threshold tight enough that the budget
// binds (unless loose). With absent, the dump's optional state tensors are
// left out (DUMPS.md's defaults).
func fdRandomRun(rng *rand.Rand, sem engine.NgramSemantics, rows, l, m, alphabet int, loose, absent bool) *engine.Run {
	hybrid := sem == engine.NgramFastDeployHybrid
	maxDraft := 1 + rng.IntN(8)
	width := maxDraft + 1
	in := engine.NewTensor("input_ids", engine.I64, rows, l)
	inLen := engine.NewTensor("input_ids_len", engine.I32, rows)
	pre := engine.NewTensor("pre_ids", engine.I32, rows, m)
	step := engine.NewTensor("step_idx", engine.I64, rows)
	enc := engine.NewTensor("seq_lens_encoder", engine.I32, rows)
	dec := engine.NewTensor("seq_lens_decoder", engine.I32, rows)
	now := engine.NewTensor("seq_lens_this_time", engine.I32, rows)
	decCap := engine.NewTensor("max_dec_len", engine.I64, rows)
	num := engine.NewTensor("draft_token_num", engine.I32, rows)
	for r := range rows {
		n, s := rng.IntN(l+1), rng.IntN(m)
		inLen.SetInt(r, int64(n))
		step.SetInt(r, int64(s))
		for i := range l {
			in.SetInt(r*l+i, int64(rng.IntN(alphabet)))
		}
		from := -1 // the prompt position being copied, -1 for none
		for i := range m {
			if from < 0 && n > 0 && rng.IntN(6) == 0 {
				from = rng.IntN(n)
			}
			v := int64(rng.IntN(alphabet))
			if from >= 0 {
				v = in.Int(r*l + from)
				if from++; from >= n || rng.IntN(12) == 0 {
					from = -1
				}
			}
			pre.SetInt(r*m+i, v)
		}
		switch kind := rng.IntN(10); {
		case kind == 0: // an encoder row (prefill chunk)
			e := 1 + rng.IntN(64)
			enc.SetInt(r, int64(e))
			dec.SetInt(r, int64(rng.IntN(2)))
			now.SetInt(r, int64(e))
		case kind == 1: // an inactive row
			now.SetInt(r, 0)
		default:
			dec.SetInt(r, int64(1+rng.IntN(1000)))
			now.SetInt(r, 1)
		}
		if hybrid {
			now.SetInt(r, int64(rng.IntN(width+1)))
		}
		c := int64(1 << 40)
		if rng.IntN(3) == 0 { // near the request's length cap
			c = int64(s + rng.IntN(4))
		}
		decCap.SetInt(r, c)
		num.SetInt(r, int64(rng.IntN(maxDraft+1)))
	}
	threshold := rng.IntN(3*rows + 8)
	if loose {
		threshold = 1 << 20
	}
	maxN := 1 + rng.IntN(4)
	run := &engine.Run{
		Source: "random", Op: engine.OpNgramMatch, InputIDs: in, InputIDsLen: inLen, PreIDs: pre, StepIdx: step,
		SeqLensEncoder: enc, SeqLensDecoder: dec, SeqLensThisTime: now, MaxDecLen: decCap, DraftTokenNum: num,
		Params: engine.Params{MaxNgramSize: maxN, MinNgramSize: 1 + rng.IntN(maxN), MaxDraftTokens: maxDraft,
			Threshold: threshold, NgramSemantics: sem},
	}
	if hybrid {
		run.SeqLensEncoder, run.DraftTokenNum = nil, nil // the hybrid reads neither
	}
	if absent {
		run.SeqLensEncoder, run.SeqLensDecoder, run.MaxDecLen, run.DraftTokenNum = nil, nil, nil, nil
		if !hybrid {
			run.SeqLensThisTime = nil
		}
	}
	return run
}

// fastDeployModel is csrc/ngram_fastdeploy.cu's decomposition of FastDeploy's
// ngram_match, in Go: each row's search runs with no budget (the first
// window, n from the longest, with a token after it) and leaves the tokens
// it would draft with room to spare; the budget then runs in row order as
// the kernel's last block runs it (room = threshold - sum - unprocessed; a
// row with room for fewer than two tokens drafts nothing, else min(want,
// room)). TestFastDeployKernelModel checks that this decomposition writes
// what engine/cpu's loop writes, which keeps the kernel's arithmetic
// honest on machines without a GPU (the GPU suite checks the kernel).
func fastDeployModel(run *engine.Run) (draft, seqLens []int64) {
	p := run.Params
	hybrid := p.NgramSemantics == engine.NgramFastDeployHybrid
	rows, width := run.PreIDs.Dim(0), p.MaxDraftTokens+1
	l, m := run.InputIDs.Dim(1), run.PreIDs.Dim(1)
	minN := 1
	if hybrid {
		minN = max(p.MinNgramSize, 1)
	}
	type fdRow struct {
		src, start, want, ori, base int64
		active, reserved            bool
	}
	state := make([]fdRow, rows)
	for r := range rows {
		s, step := run.FastDeployRow(r), run.StepIdx.Int(r)
		var f fdRow
		var limit int64
		if hybrid {
			f.ori, f.base = s.ThisTime, s.ThisTime
			limit = min(int64(p.MaxDraftTokens)-f.ori+1, s.MaxDecLen-step-1)
			f.active, f.reserved = f.ori != 0 && limit > 0, s.Decoder > 0
		} else {
			f.ori = 1
			switch {
			case s.Encoder > 0:
				f.base = s.ThisTime
			case s.Decoder > 0:
				f.base = 1
			}
			limit = min(s.DraftTokenNum, s.MaxDecLen-step-1)
			f.active, f.reserved = s.Encoder == 0 && s.Decoder > 0, s.Decoder > 0 || s.Encoder > 0
		}
		if f.active && limit > 0 {
			n := run.InputIDsLen.Int(r)
			prompt := func(i int64) int64 { return run.InputIDs.Int(r*l + int(i)) }
			gen := func(i int64) int64 { return run.PreIDs.Int(r*m + int(i)) }
			leftmost := func(at func(int64) int64, hay, k int64) int64 {
				for s := int64(0); s+k < hay; s++ {
					eq := true
					for j := int64(0); j < k && eq; j++ {
						eq = at(s+j) == gen(step+1-k+j)
					}
					if eq {
						return s
					}
				}
				return -1
			}
			for k := min(int64(p.MaxNgramSize), step); k >= int64(minN) && f.src == 0; k-- {
				if s := leftmost(prompt, n, k); s >= 0 {
					f.src, f.start, f.want = 1, s+k, min(limit, n-(s+k))
					break
				}
				if s := leftmost(gen, step, k); s >= 0 {
					f.src, f.start, f.want = 2, s+k, min(limit, step-(s+k))
				}
			}
		}
		state[r] = f
	}
	unprocessed, sum := int64(0), int64(0)
	for _, f := range state {
		if f.reserved {
			unprocessed++
		}
	}
	draft, seqLens = make([]int64, rows*width), make([]int64, rows)
	for i := range draft {
		draft[i] = -1
	}
	for r, f := range state {
		sum += f.base
		var n int64
		if f.active {
			unprocessed--
			if room := int64(p.Threshold) - sum - unprocessed; room >= 2 {
				n = min(f.want, room)
			}
		}
		sum += n
		seqLens[r] = f.base + n
		for k := range n {
			var v int64
			if f.src == 1 {
				v = run.InputIDs.Int(r*l + int(f.start+k))
			} else {
				v = run.PreIDs.Int(r*m + int(f.start+k))
			}
			draft[r*width+int(f.ori+k)] = v
		}
	}
	return draft, seqLens
}

// TestFastDeployKernelModel: the kernel's decomposition (fastDeployModel)
// writes what engine/cpu's loop writes, on fresh random runs of both
// variants, budgets that bind and budgets that do not.
func TestFastDeployKernelModel(t *testing.T) {
	rng := newRand(t)
	for _, sem := range []engine.NgramSemantics{engine.NgramFastDeploy, engine.NgramFastDeployHybrid} {
		for i := range 60 {
			loose, absent := i%4 == 0, i%7 == 3
			rows := 1 + rng.IntN(64)
			t.Run(fmt.Sprintf("%s/%d/B%d", sem, i, rows), func(t *testing.T) {
				run := fdRandomRun(rng, sem, rows, 1+rng.IntN(80), 1+rng.IntN(40), 2+rng.IntN(6), loose, absent)
				want, err := cpu.New().Run(context.Background(), run)
				if err != nil {
					t.Fatal(err)
				}
				draft, seqLens := fastDeployModel(run)
				width := run.Params.MaxDraftTokens + 1
				bad := 0
				for r := range rows {
					row := draft[r*width : (r+1)*width]
					var wantRow []int64
					for k := range width {
						wantRow = append(wantRow, want.DraftOut.Int(r*width+k))
					}
					if fmt.Sprint(row) != fmt.Sprint(wantRow) || seqLens[r] != want.SeqLensThisTime.Int(r) {
						t.Errorf("row %d (state %+v, step %d): model drafts %v, seq_lens %d; engine/cpu %v, %d",
							r, run.FastDeployRow(r), run.StepIdx.Int(r), row, seqLens[r], wantRow, want.SeqLensThisTime.Int(r))
						if bad++; bad == 3 {
							t.FailNow()
						}
					}
				}
			})
		}
	}
}

// fdScenarios are the catalogue's FastDeploy n-gram scenarios.
var fdScenarios = []string{"fastdeploy-ngram", "fastdeploy-hybrid"}

// fdScenarioRun loads scenario name's dump as `sampviz check` does.
func fdScenarioRun(t *testing.T, name string) *engine.Run {
	t.Helper()
	sc, ok := scenarios.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %s", name)
	}
	b, err := sc.DumpBytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := dump.Parse(sc.FileName(), b)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	run, err := dump.BuildRun(f, sc.Overrides.Engine())
	if err != nil {
		t.Fatalf("build run: %v", err)
	}
	if !run.Params.NgramSemantics.FastDeploy() {
		t.Fatalf("scenario %s has ngram_semantics %q, want FastDeploy's", name, run.Params.NgramSemantics)
	}
	return run
}

// TestFastDeployPlansWithoutFallback: the runs the GPU suite gives the
// kernel (fdRandomRun's and the scenarios') plan for it, none refused to
// the cpu backend, and the kernel's decomposition writes engine/cpu's
// outputs on the scenarios too.
func TestFastDeployPlansWithoutFallback(t *testing.T) {
	rng := newRand(t)
	runs := map[string]*engine.Run{}
	for _, name := range fdScenarios {
		runs[name] = fdScenarioRun(t, name)
	}
	for i, sem := range []engine.NgramSemantics{engine.NgramFastDeploy, engine.NgramFastDeployHybrid} {
		runs[fmt.Sprintf("random %s", sem)] = fdRandomRun(rng, sem, 1+rng.IntN(256), 300, 60, 6, false, i == 1)
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			p, err := buildPlan(run)
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if !p.req.FastDeploy {
				t.Fatalf("planned for csrc/ngram.cu: %+v", p.req)
			}
			want, err := cpu.New().Run(context.Background(), run)
			if err != nil {
				t.Fatal(err)
			}
			draft, seqLens := fastDeployModel(run)
			for i, v := range draft {
				if w := want.DraftOut.Int(i); v != w {
					t.Fatalf("draft_out element %d: model %d, engine/cpu %d", i, v, w)
				}
			}
			for r, v := range seqLens {
				if w := want.SeqLensThisTime.Int(r); v != w {
					t.Fatalf("seq_lens_this_time_out row %d: model %d, engine/cpu %d", r, v, w)
				}
			}
		})
	}
}

// TestBenchNgramFastDeploy: the bench takes FastDeploy's rules and refuses
// an unknown one, and its floor (MinBytes) is what the plan of the same
// shape counts plus FastDeploy's per-row state, which the kernel reads too
// (four int32 arrays and the int64 max_dec_len).
func TestBenchNgramFastDeploy(t *testing.T) {
	for _, tt := range []struct {
		sem     engine.NgramSemantics
		rows    int
		seq     int
		refused bool
	}{
		{engine.NgramFastDeploy, 32, 512, false},
		{engine.NgramFastDeployHybrid, 256, 1024, false},
		{engine.NgramSampviz, 1, 512, false},
		{"vllm", 1, 512, true},
	} {
		t.Run(string(tt.sem), func(t *testing.T) {
			c := BenchCase{Op: engine.OpNgramMatch, DType: engine.F32, Rows: tt.rows, PromptLen: tt.seq, GenLen: tt.seq, NgramSemantics: tt.sem}
			err := c.validate()
			if tt.refused != (err != nil) {
				t.Fatalf("validate: %v, want refused %v", err, tt.refused)
			}
			if tt.refused {
				return
			}
			ids := func(name string, rows, cols int) *engine.Tensor {
				return engine.NewTensor(name, engine.I32, rows, cols)
			}
			run := &engine.Run{Op: engine.OpNgramMatch, InputIDs: ids("input_ids", tt.rows, tt.seq), PreIDs: ids("pre_ids", tt.rows, tt.seq),
				InputIDsLen: engine.NewTensor("input_ids_len", engine.I32, tt.rows), StepIdx: engine.NewTensor("step_idx", engine.I32, tt.rows),
				Params: engine.Params{MaxNgramSize: 3, MaxDraftTokens: ngramDraft, Threshold: 128, NgramSemantics: tt.sem}}
			p, err := buildPlan(run)
			if err != nil {
				t.Fatal(err)
			}
			state := int64(0)
			if tt.sem.FastDeploy() {
				state = 24 * int64(tt.rows)
			}
			if got, want := c.MinBytes(), p.bytes+state; got != want {
				t.Errorf("MinBytes %d, want the plan's %d bytes and %d of state", got, p.bytes, state)
			}
		})
	}
}
