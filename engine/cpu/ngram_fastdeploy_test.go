package cpu

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// fdRow is one row of a FastDeploy ngram_match test: pre holds the
// generated tokens up to and including the current one (step_idx is
// len(pre)-1); enc, dec, this and capLen are seq_lens_encoder,
// seq_lens_decoder, seq_lens_this_time and max_dec_len (capLen 0: no cap).
type fdRow struct {
	prompt, pre         []int64
	enc, dec, this, cap int64
}

// fdRun builds an ngram_match run under sem from rows, padded with -7.
func fdRun(sem engine.NgramSemantics, rows []fdRow, maxN, minN, maxDraft, threshold int) *engine.Run {
	b := len(rows)
	l, m := 1, 1
	for _, r := range rows {
		l, m = max(l, len(r.prompt)), max(m, len(r.pre))
	}
	in, pre := make([]int64, b*l), make([]int64, b*m)
	var inLen, step, enc, dec, this, capLen []int64
	for i, r := range rows {
		for j := range l {
			in[i*l+j] = -7
			if j < len(r.prompt) {
				in[i*l+j] = r.prompt[j]
			}
		}
		for j := range m {
			pre[i*m+j] = -7
			if j < len(r.pre) {
				pre[i*m+j] = r.pre[j]
			}
		}
		c := r.cap
		if c == 0 {
			c = 1 << 40
		}
		inLen, step = append(inLen, int64(len(r.prompt))), append(step, int64(max(len(r.pre)-1, 0)))
		enc, dec, this, capLen = append(enc, r.enc), append(dec, r.dec), append(this, r.this), append(capLen, c)
	}
	ints := func(name string, v []int64) *engine.Tensor { return engine.FromInts(name, engine.I64, []int{b}, v) }
	return &engine.Run{
		Source: "test", Op: engine.OpNgramMatch,
		InputIDs: engine.FromInts("input_ids", engine.I64, []int{b, l}, in), InputIDsLen: ints("input_ids_len", inLen),
		PreIDs: engine.FromInts("pre_ids", engine.I64, []int{b, m}, pre), StepIdx: ints("step_idx", step),
		SeqLensEncoder: ints("seq_lens_encoder", enc), SeqLensDecoder: ints("seq_lens_decoder", dec),
		SeqLensThisTime: ints("seq_lens_this_time", this), MaxDecLen: ints("max_dec_len", capLen),
		Params: engine.Params{MaxNgramSize: maxN, MinNgramSize: minN, MaxDraftTokens: maxDraft, Threshold: threshold, NgramSemantics: sem},
	}
}

// TestFastDeployBudget checks FastDeploy's threshold budget, row states,
// caps and layout, case by case, in the CPU twin and the reference.
func TestFastDeployBudget(t *testing.T) {
	long := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	dec := func(pre ...int64) fdRow { return fdRow{prompt: long, pre: pre, dec: 4} }
	tests := []struct {
		name      string
		sem       engine.NgramSemantics
		rows      []fdRow
		minN      int
		threshold int
		wantLens  []int64
		want      [][]int64 // each row's draft_out, 5 columns
	}{
		{
			name: "ample threshold: drafts from column 1", sem: engine.NgramFastDeploy, threshold: 128,
			rows:     []fdRow{dec(0, 2), dec(0, 5)},
			wantLens: []int64{5, 5}, want: [][]int64{{-1, 3, 4, 5, 6}, {-1, 6, 7, 8, 9}},
		},
		{
			// row 0: sum 1, 2 reserved, drafts 4 (sum 5); row 1: sum 6 + 1
			// reserved reaches threshold - 1 = 7: skipped; row 2 likewise.
			name: "a token reserved for every later row", sem: engine.NgramFastDeploy, threshold: 8,
			rows:     []fdRow{dec(0, 2), dec(0, 2), dec(0, 2)},
			wantLens: []int64{5, 1, 1}, want: [][]int64{{-1, 3, 4, 5, 6}, {-1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1}},
		},
		{
			// row 1: sum 6 + 1 reserved = 7 < 8: clamped to 9 - 6 - 1 = 2.
			name: "the draft clamped to threshold - sum - reserved", sem: engine.NgramFastDeploy, threshold: 9,
			rows:     []fdRow{dec(0, 2), dec(0, 2), dec(0, 2)},
			wantLens: []int64{5, 3, 1}, want: [][]int64{{-1, 3, 4, 5, 6}, {-1, 3, 4, -1, -1}, {-1, -1, -1, -1, -1}},
		},
		{
			name: "the row's own token counted: threshold 2 drafts nothing", sem: engine.NgramFastDeploy, threshold: 2,
			rows:     []fdRow{dec(0, 2)},
			wantLens: []int64{1}, want: [][]int64{{-1, -1, -1, -1, -1}},
		},
		{
			name: "threshold 3 drafts 2", sem: engine.NgramFastDeploy, threshold: 3,
			rows:     []fdRow{dec(0, 2)},
			wantLens: []int64{3}, want: [][]int64{{-1, 3, 4, -1, -1}},
		},
		{
			// the encoder row adds its chunk (5) and keeps its reservation;
			// the inactive row is 0 and reserves nothing: row 2 has sum 6,
			// 1 reserved, and is clamped to 10 - 6 - 1 = 3.
			name: "encoder and inactive rows", sem: engine.NgramFastDeploy, threshold: 10,
			rows:     []fdRow{{prompt: long, pre: []int64{0, 2}, enc: 5, this: 5}, {prompt: long, pre: []int64{0, 2}}, dec(0, 2)},
			wantLens: []int64{5, 0, 4}, want: [][]int64{{-1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1}, {-1, 3, 4, 5, -1}},
		},
		{
			name: "max_dec_len - step_idx - 1 caps the draft", sem: engine.NgramFastDeploy, threshold: 128,
			rows:     []fdRow{{prompt: long, pre: []int64{0, 2}, dec: 4, cap: 4}, {prompt: long, pre: []int64{0, 2}, dec: 4, cap: 2}},
			wantLens: []int64{3, 1}, want: [][]int64{{-1, 3, 4, -1, -1}, {-1, -1, -1, -1, -1}},
		},
		{
			// [9] matches the prompt's last token, with nothing after it:
			// the generated tokens before the current one are searched.
			name: "a match at the prompt's end falls through to the generated tokens", sem: engine.NgramFastDeploy, threshold: 128,
			rows:     []fdRow{{prompt: []int64{1, 2, 3, 9}, pre: []int64{9, 5, 9}, dec: 4}},
			wantLens: []int64{2}, want: [][]int64{{-1, 5, -1, -1, -1}},
		},
		{
			name: "the current token is never drafted", sem: engine.NgramFastDeploy, threshold: 128,
			rows:     []fdRow{{prompt: []int64{1}, pre: []int64{7, 8, 7}, dec: 4}},
			wantLens: []int64{2}, want: [][]int64{{-1, 8, -1, -1, -1}},
		},
		{
			// 2 MTP tokens: at most 4 - 2 + 1 = 3 drafts, from column 2.
			name: "hybrid: drafts after the MTP tokens", sem: engine.NgramFastDeployHybrid, threshold: 1024, minN: 1,
			rows:     []fdRow{{prompt: long, pre: []int64{0, 2}, dec: 4, this: 2}, {prompt: long, pre: []int64{0, 2}, dec: 4}},
			wantLens: []int64{5, 0}, want: [][]int64{{-1, -1, 3, 4, 5}, {-1, -1, -1, -1, -1}},
		},
		{
			name: "hybrid: min_ngram_size 2 skips a 1-gram match", sem: engine.NgramFastDeployHybrid, threshold: 1024, minN: 2,
			rows:     []fdRow{{prompt: long, pre: []int64{0, 0, 2}, dec: 4, this: 1}, {prompt: long, pre: []int64{0, 1, 2}, dec: 4, this: 1}},
			wantLens: []int64{1, 5}, want: [][]int64{{-1, -1, -1, -1, -1}, {-1, 3, 4, 5, 6}},
		},
		{
			// row 0: sum 2 (its MTP tokens), 1 reserved, clamped to 5 - 2 - 1 = 2;
			// row 1: sum 4 + 1 reaches threshold - 1.
			name: "hybrid: the MTP tokens count toward the threshold", sem: engine.NgramFastDeployHybrid, threshold: 5, minN: 1,
			rows:     []fdRow{{prompt: long, pre: []int64{0, 2}, dec: 4, this: 2}, {prompt: long, pre: []int64{0, 2}, dec: 4, this: 1}},
			wantLens: []int64{4, 1}, want: [][]int64{{-1, -1, 3, 4, -1}, {-1, -1, -1, -1, -1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			minN := max(tt.minN, 1)
			run := fdRun(tt.sem, tt.rows, 3, minN, 4, tt.threshold)
			out := mustRun(t, run)
			if got := out.SeqLensThisTime.Ints(); !slices.Equal(got, tt.wantLens) {
				t.Errorf("cpu seq_lens_this_time %v, want %v", got, tt.wantLens)
			}
			if got := ref.NgramSeqLens(run); !slices.Equal(got, tt.wantLens) {
				t.Errorf("ref seq_lens_this_time %v, want %v", got, tt.wantLens)
			}
			got, refDrafts := out.DraftOut.Ints(), ref.NgramMatch(run)
			for r, want := range tt.want {
				if row := got[r*5 : r*5+5]; !slices.Equal(row, want) {
					t.Errorf("cpu row %d: draft_out %v, want %v", r, row, want)
				}
				if !slices.Equal(refDrafts[r], want) {
					t.Errorf("ref row %d: draft %v, want %v", r, refDrafts[r], want)
				}
			}
		})
	}
}

// TestFastDeployTwinMatchesReference: on random batches (encoder, inactive
// and decoding rows, caps, thresholds, both rules) the CPU twin, written as
// FastDeploy's CPU loop, and the reference, written from the rule, agree on
// every row.
func TestFastDeployTwinMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	for trial := range 200 {
		sem := engine.NgramFastDeploy
		if trial%2 == 1 {
			sem = engine.NgramFastDeployHybrid
		}
		maxDraft := 1 + rng.IntN(5)
		rows := make([]fdRow, 1+rng.IntN(12))
		for i := range rows {
			r := &rows[i]
			for range rng.IntN(30) {
				r.prompt = append(r.prompt, int64(rng.IntN(5)))
			}
			for range 1 + rng.IntN(12) {
				r.pre = append(r.pre, int64(rng.IntN(5)))
			}
			switch rng.IntN(5) {
			case 0:
				r.enc, r.this = int64(1+rng.IntN(6)), int64(1+rng.IntN(6))
			case 1:
			default:
				r.dec = int64(1 + rng.IntN(50))
				r.this = int64(rng.IntN(3))
			}
			if rng.IntN(3) == 0 {
				r.cap = int64(rng.IntN(20))
			}
			if sem == engine.NgramFastDeployHybrid {
				// The hybrid's MTP tokens fit the draft buffer (engine/dump
				// refuses more).
				r.this = min(r.this, int64(maxDraft+1))
			}
		}
		run := fdRun(sem, rows, 1+rng.IntN(3), 1+rng.IntN(2), maxDraft, rng.IntN(30))
		out := mustRun(t, run)
		lens, drafts := ref.NgramSeqLens(run), ref.NgramMatch(run)
		if got := out.SeqLensThisTime.Ints(); !slices.Equal(got, lens) {
			t.Fatalf("trial %d (%s): cpu seq_lens_this_time %v, ref %v", trial, sem, got, lens)
		}
		w := out.DraftOut.Dim(1)
		for r := range rows {
			if got := out.DraftOut.Ints()[r*w : r*w+w]; !slices.Equal(got, drafts[r]) {
				t.Fatalf("trial %d (%s) row %d: cpu %v, ref %v", trial, sem, r, got, drafts[r])
			}
		}
	}
}

// TestFastDeployOutsideRows checks that a run built in memory (no dump's
// checks) whose drafting row has a step_idx or input_ids_len outside
// pre_ids or input_ids is refused in one sentence naming the row, never a
// slice out of range: the cuda plan sends such runs here.
func TestFastDeployOutsideRows(t *testing.T) {
	long := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	tests := []struct {
		name      string
		step, n   int64
		wantWords string
	}{
		{"negative step_idx", -5, 9, "row 0: step_idx -5 or input_ids_len 9 outside"},
		{"negative input_ids_len", 1, -3, "row 0: step_idx 1 or input_ids_len -3 outside"},
		{"step_idx past pre_ids", 2, 9, "row 0: step_idx 2 or input_ids_len 9 outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := fdRun(engine.NgramFastDeploy, []fdRow{{prompt: long, pre: []int64{0, 2}, dec: 4}}, 3, 1, 4, 128)
			run.StepIdx = engine.FromInts("step_idx", engine.I64, []int{1}, []int64{tt.step})
			run.InputIDsLen = engine.FromInts("input_ids_len", engine.I64, []int{1}, []int64{tt.n})
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panic: %v", p)
					}
				}()
				_, err = New().Run(context.Background(), run)
			}()
			if err == nil || !strings.Contains(err.Error(), tt.wantWords) {
				t.Fatalf("error %v, want one saying %q", err, tt.wantWords)
			}
		})
	}
}
