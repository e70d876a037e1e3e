package session

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
)

// A job's memory is known before it runs: the dump's header gives every
// shape and dtype, and the op, the draws and the trials fix what our
// backend writes and what the judge holds. need counts what a job holds at
// its peak, stage by stage, and the session refuses a job whose need is
// over Session.MaxMemory before it reads anything big: a dump that would
// take the machine's memory is an *InputError (HTTP 413, exit status 2),
// never a crash.
//
// The figures per token and per row below were measured on the CPU backend
// (engine/session's TestMemoryBudget keeps them honest: every accepted
// run's peak resident memory stays within the budget plus 10%).
const (
	// judgeBytesPerToken is what one judging worker holds per token of the
	// vocabulary (its row buffers, workspace and the reference
	// distributions of its row): measured 145.
	judgeBytesPerToken = 160
	// distBytesPerToken is one cached reference distribution (the server's
	// error summaries keep distCacheSize of them): measured up to 30.
	distBytesPerToken = 32
	// reportBytesPerRow is one row of one output in the report, the
	// stream and their JSON.
	reportBytesPerRow = 4 << 10
	// traceBytesPerStep is one traced speculative step: engine.SpecStep and
	// its stored tensors; treeTraceBytesPerStep one traced node of a draft
	// tree: engine.TreeStep and its.
	traceBytesPerStep     = 24 + 17
	treeTraceBytesPerStep = 20 + 17
	// treeBytesPerToken is what the CPU twin of spec_tree_verify holds per
	// node and token of the row it verifies: each node's stop law (token
	// and cumulative weight, built on the first trial that stops there).
	treeBytesPerToken = 12
	// runtimeBytes is the process before any job: the Go runtime, the
	// binary's tables, the HTTP server.
	runtimeBytes = 48 << 20
	// groupTablesBytes is what one judging worker's grouping of a row of
	// 16-bit logits holds whatever the row (tables indexed by pattern).
	groupTablesBytes = 768 << 10
	// heapSlack is the garbage collector's margin over the live heap when
	// the process runs under its memory limit (debug.SetMemoryLimit).
	heapSlack = 1.1
)

// The parts of a Need that outlive the judgement (a Diff holds them while
// it judges the other run).
const (
	partDump   = "the dump's tensors"
	partReport = "the report"
)

// Need is the memory a job holds at its peak, by what holds it.
type Need struct {
	Parts []NeedPart
	// Total is the peak: the larger of the backend's stage and the judge's,
	// each the sum of what it holds.
	Total int64
}

// NeedPart is one holder of memory.
type NeedPart struct {
	What  string
	Bytes int64
}

// String says the need in words: "3.1 GiB (the dump's tensors 1.0 GiB, our
// outputs 2.0 GiB, ...)".
func (n Need) String() string {
	if w := n.Words(); w != "" {
		return engine.FormatBytes(n.Total) + " (" + w + ")"
	}
	return engine.FormatBytes(n.Total)
}

// Words lists the parts of 1 MiB or more: "the dump's tensors 1.0 GiB, our
// outputs 2.0 GiB".
func (n Need) Words() string {
	var parts []string
	for _, p := range n.Parts {
		if p.Bytes >= 1<<20 {
			parts = append(parts, p.What+" "+engine.FormatBytes(p.Bytes))
		}
	}
	return strings.Join(parts, ", ")
}

// need estimates the memory of running b (nil: none) on run, whose tensors
// come from f (nil for a run built in memory), judging with workers
// workers; stored says the outputs are stored and streamed to pages (the
// server).
func need(run *engine.Run, f *dump.File, b engine.Backend, workers int, stored bool) Need {
	rows, vocab := int64(run.Rows()), int64(run.Vocab())
	k := int64(run.DraftLen())
	nodes := int64(run.Nodes()) // a tree's path holds at most its nodes
	p := &run.Params
	var n Need
	add := func(what string, bytes float64) int64 {
		v := int64(bytes)
		if v > 0 {
			n.Parts = append(n.Parts, NeedPart{What: what, Bytes: v})
		}
		return v
	}

	// The dump's tensors: mapped pages the run reads, or inflated buffers.
	var input int64
	if f != nil {
		for _, name := range dump.UsedTensors(f, run) {
			if t := f.Tensor(name); t != nil {
				input += int64(t.NumElements()) * int64(t.DType.Size())
			}
		}
	} else {
		for _, t := range append([]*engine.Tensor{run.Logits, run.TargetLogits, run.DraftTokens, run.DraftTrials, run.DraftProbs,
			run.Candidates, run.NextToken, run.NextSibling, run.InputIDs, run.InputIDsLen, run.PreIDs, run.StepIdx, run.Valid,
			run.SeqLensEncoder, run.SeqLensDecoder, run.SeqLensThisTime, run.MaxDecLen, run.DraftTokenNum}, externals(run)...) {
			if t != nil {
				input += int64(len(t.Data))
			}
		}
	}
	add(partDump, float64(input))

	// Our backend's outputs.
	var ours, trace int64
	if b != nil {
		switch run.Op {
		case engine.OpArgmax:
			ours = 4 * rows
		case engine.OpSoftmax, engine.OpRenorm:
			ours = 4 * rows * vocab
		case engine.OpSample:
			// A backend that counts its draws returns V counts a row
			// whatever the draws; the others every draw.
			drawn := int64(max(p.Draws, 0))
			if engine.CountsDraws(b, run) {
				drawn = vocab
			}
			ours = 4*rows*(1+drawn) + 8*rows // the seed reruns' tokens too
		case engine.OpSpecVerify:
			trials := int64(max(p.Trials, 1))
			ours = 4*rows*(k+1) + 8*rows
			if trials > 1 {
				ours += 4 * trials * rows * (k + 1)
			}
			trace = min(trials, 16) * rows * (k + 1) * traceBytesPerStep
		case engine.OpSpecTreeVerify:
			trials := int64(max(p.Trials, 1))
			ours = 2*4*rows*nodes + 4*rows
			if trials > 1 {
				ours += 2 * 4 * trials * rows * nodes
			}
			trace = min(trials, 16) * rows * nodes * treeTraceBytesPerStep
			if b.Name() == "cpu" {
				ours += int64(min(max(workers, 1), max(run.Rows(), 1))) * (treeBytesPerToken*nodes + 40) * vocab
			}
		case engine.OpNgramMatch:
			ours = 4 * rows * int64(p.MaxDraftTokens)
		}
		add("our outputs", heapSlack*float64(ours+trace))
	}

	// The backend's stage: the GPU worker's shared memory holds the inputs
	// (F64 as F32) and the outputs beside our copies.
	var shm int64
	if b != nil && b.Name() == "cuda" {
		shm = input + ours + trace
		for _, t := range []*engine.Tensor{run.Logits, run.TargetLogits, run.DraftProbs} {
			if t != nil && t.DType == engine.F64 {
				shm -= int64(t.NumElements()) * 4
			}
		}
		add("the GPU worker's shared memory", float64(shm))
	}

	// The judge's stage.
	w := int64(min(max(workers, 1), max(run.Rows(), 1)))
	per := judgeBytesPerToken * vocab
	switch run.Op {
	case engine.OpSample:
		per += 8 * vocab // draw counts
	case engine.OpSpecVerify:
		per = judgeBytesPerToken * vocab * (k + 1)
		per += int64(max(p.Trials, 1)) * (4*(k+1) + 24) // one row's trials
	case engine.OpLogitsGate:
		per += 16 * vocab // the golden row and an engine's, in float64
	case engine.OpSpecTreeVerify:
		// The laws of every node (its target's probabilities, base and
		// classes, its final residual), a law and counts per position.
		per += (17+8+2*8)*vocab*nodes + int64(max(p.Trials, 1))*(16*nodes+24)
	}
	if n := floatOutputs(run, b); n > 1 {
		per += 8 * vocab * n // each one's row, kept to compare them pairwise
	}
	if d := run.InputDType(); d == engine.BF16 || d == engine.F16 {
		// Rows of 16-bit logits are measured by group of logit pattern
		// (engine/compare): the tables of the grouping, each token's group,
		// and each float output's values by group.
		per += groupTablesBytes + 2*vocab + 8*min(vocab, 1<<16)*floatOutputs(run, b)
	}
	judge := add("the judge", heapSlack*float64(w*per))
	outputs := int64(len(externals(run)))
	if b != nil {
		outputs++
	}
	report := add(partReport, heapSlack*float64(rows*max(outputs, 1)*reportBytesPerRow))
	var pages int64
	if stored {
		// GOMAXPROCS rows summarised at once, and the cache of their
		// distributions; neither holds more rows than the run has.
		g := int64(runtime.GOMAXPROCS(0))
		busy, cached := min(g, max(rows, 1)), min(2*g+2, max(rows, 1))
		pages = add("the pages' error summaries", heapSlack*float64(busy*40*vocab+cached*distBytesPerToken*vocab+rows*max(outputs, 1)*reportBytesPerRow))
	}
	base := add("the process", runtimeBytes)

	backendStage := base + input + shm + int64(heapSlack*float64(ours+trace))
	judgeStage := base + input + int64(heapSlack*float64(ours+trace)) + judge + report + pages
	n.Total = max(backendStage, judgeStage)
	return n
}

// floatOutputs counts the outputs of run that are compared with each other
// elementwise: the external probs, logits and logprobs, and ours when b computes
// probabilities.
func floatOutputs(run *engine.Run, b engine.Backend) int64 {
	var n int64
	for name := range run.External {
		if base, _ := engine.SplitName(name); base == "probs" || base == "logits" || base == "logprobs" {
			n++
		}
	}
	if b != nil && (run.Op == engine.OpSoftmax || run.Op == engine.OpRenorm) {
		n++
	}
	return n
}

// externals lists the run's external output tensors.
func externals(run *engine.Run) []*engine.Tensor {
	var ts []*engine.Tensor
	for _, t := range run.External {
		ts = append(ts, t)
	}
	return ts
}

// readLimit is the memory reading a dump may take before its run is
// built (dump.OpenWithin: a .pt file's unpickling), what MaxMemory leaves
// beside the process; 0 when there is no budget.
func (s *Session) readLimit() int64 {
	if s.MaxMemory <= 0 {
		return 0
	}
	return max(s.MaxMemory-runtimeBytes, 1)
}

// overBudget returns the *InputError of a job whose need is over max (0:
// no limit), or nil.
func overBudget(source string, n Need, limit int64) error {
	if limit <= 0 || n.Total <= limit {
		return nil
	}
	return &InputError{
		Msg: fmt.Sprintf("%s needs about %s of memory to judge (%s), more than the %s allowed (--max-memory)",
			source, engine.FormatBytes(n.Total), n.Words(), engine.FormatBytes(limit)),
		OverBudget: true,
	}
}

// shared is the memory the jobs judged at once share: MaxMemory, less the
// process itself, which every Need counts once. Execute and Rejudge reserve
// their job's need from it (beside the process) before they read the dump's
// tensors, and Diff the need of its comparison, each waiting in turn while
// others hold it; so the jobs a server judges at once (one per GPU) never
// hold more than MaxMemory together. It never refuses a need: one over
// MaxMemory was refused before (overBudget), and one over what it holds
// waits for the whole of it. The zero value is ready to use.
type shared struct {
	mu      sync.Mutex
	held    int64
	limit   int64
	waiting []*waiter // first come, first served: a large need is not passed by small ones
}

// waiter is a reservation waiting for its bytes; ready closes once they are
// its.
type waiter struct {
	bytes int64
	ready chan struct{}
}

// reserve takes bytes of limit (the shared budget; 0 or less: no bound),
// waiting while other reservations hold them or ctx ends. release, called
// once the job no longer holds its memory, gives them back; calling it again
// does nothing. A reservation over limit waits until it holds all of it.
func (m *shared) reserve(ctx context.Context, bytes, limit int64) (release func(), err error) {
	if limit <= 0 || bytes <= 0 {
		return func() {}, nil
	}
	bytes = min(bytes, limit)
	m.mu.Lock()
	m.limit = limit
	if len(m.waiting) == 0 && m.held+bytes <= limit {
		m.held += bytes
		m.mu.Unlock()
		return m.releaser(bytes), nil
	}
	w := &waiter{bytes: bytes, ready: make(chan struct{})}
	m.waiting = append(m.waiting, w)
	m.mu.Unlock()
	select {
	case <-w.ready:
		return m.releaser(bytes), nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-w.ready:
		// Granted as ctx ended: give the bytes back.
		m.held -= bytes
	default:
		m.waiting = slices.DeleteFunc(m.waiting, func(o *waiter) bool { return o == w })
	}
	m.grant()
	return nil, fmt.Errorf("wait for memory beside the runs being judged: %w", ctx.Err())
}

// releaser returns the function that gives bytes back once.
func (m *shared) releaser(bytes int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.held -= bytes
			m.grant()
		})
	}
}

// grant hands the waiting reservations their bytes, in order, while they
// fit. m.mu is held.
func (m *shared) grant() {
	for len(m.waiting) > 0 && m.held+m.waiting[0].bytes <= m.limit {
		w := m.waiting[0]
		m.waiting = m.waiting[1:]
		m.held += w.bytes
		close(w.ready)
	}
}

// reservation is what a job holds of the shared budget; the zero value holds
// nothing, and release is safe to call on it.
type reservation struct {
	release func()
}

// free gives the reservation back.
func (r *reservation) free() {
	if r.release != nil {
		r.release()
	}
}

// reserve takes a job's need n from the session's shared budget into r
// (beside the process, counted once), waiting while the jobs judged
// beside it hold too much.
func (s *Session) reserve(ctx context.Context, r *reservation, n Need) error {
	release, err := s.mem.reserve(ctx, n.Total-runtimeBytes, s.MaxMemory-runtimeBytes)
	if err != nil {
		return err
	}
	r.free()
	r.release = release
	return nil
}

// peakNeed is n, what running b on run holds, or more when a backend the
// job may fall back to (runOrFallBack: b's kernels refuse the run) holds
// more within MaxMemory.
func (s *Session) peakNeed(run *engine.Run, f *dump.File, b engine.Backend, n Need, stored bool) Need {
	if b == nil {
		return n
	}
	for _, other := range s.backends {
		if other.Name() == b.Name() {
			continue
		}
		draws := run.Params.Draws
		run.Params.Draws = fallbackDraws(run, other)
		fit := drawsFit(run, other) // a fallback that cannot take the draws never runs
		o := need(run, f, other, s.workers(), stored)
		run.Params.Draws = draws
		if fit == nil && o.Total > n.Total && overBudget(run.Source, o, s.MaxMemory) == nil {
			n = o
		}
	}
	return n
}
