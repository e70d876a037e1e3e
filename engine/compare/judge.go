package compare

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// Judge judges every output against the reference of run and returns the
// report: Report.Outputs[i] judges outs[i]. Rows are judged in parallel
// (Options.Workers at once); onRow, when not nil, is called once per judged
// row of each output as soon as it is ready (out is the index in outs),
// never concurrently with itself and from the caller's goroutine. The rows
// of each OutputReport are sorted by row at the end.
//
// An output that cannot be judged (a tensor of the wrong shape or dtype, or
// one the op does not produce) fails with a note and no rows. Judge returns
// an error only when run is unusable or ctx ends first (ctx's error).
func Judge(ctx context.Context, run *engine.Run, outs []*engine.Output, o Options, onRow func(out int, row engine.RowReport)) (*engine.Report, error) {
	if run == nil {
		return nil, errors.New("judge: no run")
	}
	j := newJudge(run, outs, o)
	if err := j.judgeRows(ctx, onRow); err != nil {
		return nil, err
	}
	return j.report(), nil
}

// judge is one judgement in progress.
type judge struct {
	run         *engine.Run
	o           Options
	rows, vocab int
	plans       []*plan
	// ngram holds the exact drafts when an output needs them.
	ngram [][]int64
	// ngramRows are how the reference drafted each row, under FastDeploy's
	// rules (where a draft starts, seq_lens_this_time), else nil.
	ngramRows []ref.NgramRow
	// hists are the run-level histograms, per plan, merged from the workers.
	hists []planHists
	// pairs are the float outputs of one kind compared with each other.
	pairs []*pair
}

// planHists are one float output's run-level error histograms.
type planHists struct {
	strictAbs, strictRel, nativeAbs, nativeRel runHist
}

func newJudge(run *engine.Run, outs []*engine.Output, o Options) *judge {
	j := &judge{run: run, o: o, rows: run.Rows(), vocab: run.Vocab()}
	if j.o.Workers <= 0 {
		j.o.Workers = runtime.GOMAXPROCS(0)
	}
	for i, out := range outs {
		p := newPlan(j, i, out)
		j.plans = append(j.plans, p)
		if p.draft && j.ngram == nil {
			j.ngram = ref.NgramMatch(run)
			if run.Params.NgramSemantics.FastDeploy() {
				j.ngramRows = ref.NgramRows(run)
			}
		}
	}
	j.hists = make([]planHists, len(j.plans))
	j.pairs = newPairs(j.plans, j.rows)
	if rr := o.Reruns; rr != nil {
		if rr.Output < 0 || rr.Output >= len(j.plans) {
			for _, p := range j.plans {
				p.rep.Notes = append(p.rep.Notes, fmt.Sprintf("seed rules not judged: the reruns repeat output %d of %d", rr.Output, len(j.plans)))
			}
		} else {
			p := j.plans[rr.Output]
			var why string
			p.seeds, why = newSeedState(rr, p, j.rows)
			if why != "" {
				p.rep.Notes = append(p.rep.Notes, "seed rules not judged: "+why)
			}
		}
	}
	return j
}

// rowResult carries one row's reports (one per plan; nil for plans that judge
// no rows) from a worker to the collector.
type rowResult struct {
	row     int
	reports []*engine.RowReport
}

// judgeRows judges every row on o.Workers goroutines and collects the
// results on the caller's goroutine.
func (j *judge) judgeRows(ctx context.Context, onRow func(int, engine.RowReport)) error {
	active := false
	for _, p := range j.plans {
		active = active || p.problem == ""
	}
	if !active || j.rows == 0 {
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := min(j.o.Workers, j.rows)
	results := make(chan rowResult, 2*workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	ws := make([]*worker, workers)
	for k := range ws {
		w := newWorker(j)
		ws[k] = w
		wg.Go(func() {
			for ctx.Err() == nil {
				r := int(next.Add(1) - 1)
				if r >= j.rows {
					return
				}
				res := rowResult{row: r, reports: w.judgeRow(r)}
				select {
				case results <- res:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(results)
	}()
	for res := range results {
		if ctx.Err() != nil {
			continue // drain until the workers stop
		}
		for i, rep := range res.reports {
			if rep == nil || ctx.Err() != nil {
				continue
			}
			p := j.plans[i]
			p.rep.Rows = append(p.rep.Rows, *rep)
			if onRow != nil {
				onRow(i, *rep)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, w := range ws {
		for i := range j.hists {
			h, wh := &j.hists[i], &w.hists[i]
			h.strictAbs.merge(&wh.strictAbs)
			h.strictRel.merge(&wh.strictRel)
			h.nativeAbs.merge(&wh.nativeAbs)
			h.nativeRel.merge(&wh.nativeRel)
		}
	}
	return nil
}

// report assembles the Report once every row is judged.
func (j *judge) report() *engine.Report {
	rep := &engine.Report{
		Pass:    true,
		Op:      j.run.Op,
		Source:  j.run.Source,
		Rows:    j.rows,
		Vocab:   j.vocab,
		DType:   j.run.InputDType(),
		Notices: j.run.Notices,
	}
	rep.Tolerances = TolerancesFor(rep.DType, engine.F32, j.o)
	if len(j.plans) > 0 {
		rep.Tolerances = j.plans[0].tol
	}
	for i, p := range j.plans {
		or := p.rep
		slices.SortFunc(or.Rows, func(a, b engine.RowReport) int { return a.Row - b.Row })
		j.shifted(p, &or)
		or.Pass = p.problem == ""
		for _, r := range or.Rows {
			if !r.Pass {
				or.FailedRows++
				or.Pass = false
			}
		}
		j.runStats(p, &or)
		if p.probs {
			or.Strict = runDrift("strict", p.tol.Strict, or.Rows, j.vocab, func(r *engine.RowReport) *engine.Drift { return r.Strict }, &j.hists[i].strictAbs, &j.hists[i].strictRel)
			or.Native = runDrift("native", p.tol.Native, or.Rows, j.vocab, func(r *engine.RowReport) *engine.Drift { return r.Native }, &j.hists[i].nativeAbs, &j.hists[i].nativeRel)
		}
		if p.logprobs {
			or.Strict = runDrift("strict", p.tol.Strict, or.Rows, j.vocab, func(r *engine.RowReport) *engine.Drift { return r.Strict }, &j.hists[i].strictAbs, &j.hists[i].strictRel)
			or.Native = runDrift("native", p.tol.Native, or.Rows, j.vocab, func(r *engine.RowReport) *engine.Drift { return r.Native }, &j.hists[i].nativeAbs, &j.hists[i].nativeRel)
			kindNote(p, &or)
		}
		if p.logits {
			or.Strict = runDrift("golden", p.tol.Strict, or.Rows, j.vocab, func(r *engine.RowReport) *engine.Drift { return r.Strict }, &j.hists[i].strictAbs, &j.hists[i].strictRel)
			or.Gate = gateStats(&or)
		}
		rep.Pass = rep.Pass && or.Pass
		rep.Outputs = append(rep.Outputs, or)
	}
	rep.Padding = j.run.PaddedRows()
	rep.Modes = j.modes(rep.Outputs)
	rep.Agreement = j.agreement(rep.Outputs)
	return rep
}

// violation returns a finding that fails its row.
func violation(rule engine.Rule, token int, format string, a ...any) engine.Finding {
	return engine.Finding{Rule: rule, Severity: engine.Violation, Message: fmt.Sprintf(format, a...), Token: token}
}

// note returns a finding worth reading that does not fail its row.
func note(rule engine.Rule, token int, format string, a ...any) engine.Finding {
	return engine.Finding{Rule: rule, Severity: engine.Note, Message: fmt.Sprintf(format, a...), Token: token}
}
