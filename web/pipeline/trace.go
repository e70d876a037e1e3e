package pipeline

import (
	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/web"
)

// The speculative trace is stored beside our outputs in outputs.safetensors,
// one tensor per field of engine.SpecStep, each [T, B, K+1] (trial, row,
// position): one file written once (temporary name, then rename), which the
// row page reads one row of through the file's memory mapping, without
// decoding the rest. NaN probabilities (a target without a distribution) are
// stored as they are.
const (
	traceDraft     = "trace_draft"     // I32: the proposed token, -1 at the bonus position
	traceU         = "trace_u"         // F32: the acceptance uniform
	traceP         = "trace_p"         // F32: p(x) of the draft
	traceQ         = "trace_q"         // F32: q(x) of the draft
	traceAccepted  = "trace_accepted"  // U8: 1 when u·q(x) < p(x)
	traceResampled = "trace_resampled" // I32: the token drawn at this step, or -1
)

// traceTensors returns tr as the tensors stored beside the outputs, or nil
// when there is no trace.
func traceTensors(tr *engine.SpecTrace) []*engine.Tensor {
	if tr == nil || tr.Trials <= 0 || tr.Rows <= 0 || tr.Steps <= 0 || len(tr.Step) != tr.Trials*tr.Rows*tr.Steps {
		return nil
	}
	shape := []int{tr.Trials, tr.Rows, tr.Steps}
	draft := engine.NewTensor(traceDraft, engine.I32, shape...)
	u := engine.NewTensor(traceU, engine.F32, shape...)
	p := engine.NewTensor(traceP, engine.F32, shape...)
	q := engine.NewTensor(traceQ, engine.F32, shape...)
	acc := engine.NewTensor(traceAccepted, engine.U8, shape...)
	res := engine.NewTensor(traceResampled, engine.I32, shape...)
	for i, s := range tr.Step {
		draft.SetInt(i, int64(s.Draft))
		u.SetFloat(i, float64(s.U))
		p.SetFloat(i, float64(s.P))
		q.SetFloat(i, float64(s.Q))
		if s.Accepted {
			acc.SetInt(i, 1)
		}
		res.SetInt(i, int64(s.Resampled))
	}
	return []*engine.Tensor{draft, u, p, q, acc, res}
}

// rowTrace reads row r's part of the trace stored in f, or returns nil when
// f holds no trace (or one whose tensors do not agree).
func rowTrace(f *dump.File, r int) *web.RowTrace {
	if f == nil {
		return nil
	}
	names := []string{traceDraft, traceU, traceP, traceQ, traceAccepted, traceResampled}
	ts := make([]*engine.Tensor, len(names))
	for i, n := range names {
		ts[i] = f.Tensor(n)
		if ts[i] == nil || len(ts[i].Shape) != 3 {
			return nil
		}
		if i > 0 && engine.FormatShape(ts[i].Shape) != engine.FormatShape(ts[0].Shape) {
			return nil
		}
	}
	trials, rows, steps := ts[0].Dim(0), ts[0].Dim(1), ts[0].Dim(2)
	if r < 0 || r >= rows || trials == 0 || steps == 0 {
		return nil
	}
	tr := &web.RowTrace{Trials: trials, Steps: steps, Step: make([][]engine.SpecStep, trials)}
	for t := range trials {
		tr.Step[t] = make([]engine.SpecStep, steps)
		for i := range steps {
			at := (t*rows+r)*steps + i
			tr.Step[t][i] = engine.SpecStep{
				Draft: int32(ts[0].Int(at)), U: ts[1].Float32(at), P: ts[2].Float32(at), Q: ts[3].Float32(at),
				Accepted: ts[4].Int(at) != 0, Resampled: int32(ts[5].Int(at)),
			}
		}
	}
	return tr
}
