package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"
	"unsafe"

	"github.com/sampviz/sampviz/engine"
)

// BenchCase is one op and shape to time on device-resident random inputs
// (normal logits with standard deviation 2).
type BenchCase struct {
	Op    engine.Op    `json:"op"`
	DType engine.DType `json:"dtype"` // of the logits: F32, F16 or BF16
	Rows  int          `json:"rows"`
	Vocab int          `json:"vocab"`
	// K is spec_verify's draft length; DraftProbs gives it draft
	// distributions in DType (else one-hot drafts).
	K          int  `json:"k,omitempty"`
	DraftProbs bool `json:"draft_probs,omitempty"`
	// Temperature and the filters apply to every row.
	Temperature float64             `json:"temperature"`
	TopK        int                 `json:"top_k,omitempty"`
	TopP        float64             `json:"top_p,omitempty"` // 0 means 1 (off)
	MinP        float64             `json:"min_p,omitempty"`
	Method      engine.SampleMethod `json:"method,omitempty"`
	// Draws makes a sample case time the many-draws launch
	// (sv_sample_counts): the sample kernels that write each row's CDF,
	// then Draws draws a row counted on the device, zeroing included.
	Draws int `json:"draws,omitempty"`
	// Nodes and TreeTopK shape spec_tree_verify's tree: the first Nodes
	// nodes, breadth first, of the tree in which every node has TreeTopK
	// children (benchTree); DraftProbs gives every node a draft
	// distribution in DType (else one-hot drafts).
	Nodes    int `json:"nodes,omitempty"`
	TreeTopK int `json:"tree_topk,omitempty"`
	// PromptLen and GenLen shape ngram_match (input_ids [Rows, PromptLen],
	// pre_ids [Rows, GenLen], 8 draft tokens, n up to 3).
	PromptLen int `json:"prompt_len,omitempty"`
	GenLen    int `json:"gen_len,omitempty"`
	// NgramSemantics picks ngram_match's rule ("" is sampviz's). Under
	// FastDeploy's (fastdeploy, fastdeploy_hybrid) every row decodes, its
	// current token the last of pre_ids (step_idx GenLen-1), with
	// draft_token_num 8, no max_dec_len cap and FastDeploy's default
	// threshold (128 for fastdeploy, 1024 for the hybrid, whose rows hold
	// the current token and one MTP token); draft_out has 9 columns and
	// seq_lens_this_time_out is written too. FastDeploy's own GPU kernel
	// takes 21 us at B=32, L=M=512 and 162 us at B=256, L=M=131072 on an
	// H20 (issue 26): the peer figures for these cases.
	NgramSemantics engine.NgramSemantics `json:"ngram_semantics,omitempty"`
	// Iters is the number of timed launches (default 100) after Warmup
	// (default 10).
	Iters  int `json:"iters,omitempty"`
	Warmup int `json:"warmup,omitempty"`
	// Inputs, when set, names a safetensors file to which the worker
	// writes every input set before timing (benchInputTensors says which
	// tensors), so that `sampviz bench --peers` times its peers on the
	// very inputs the kernel gets. The result never carries it.
	Inputs string `json:"inputs,omitempty"`
}

// BenchResult is what timing a BenchCase measured.
type BenchResult struct {
	Case BenchCase `json:"case"`
	// Median and Min are over Iters launches, each timed with CUDA events.
	Median time.Duration `json:"median_ns"`
	Min    time.Duration `json:"min_ns"`
	// BackToBack is the mean of Iters launches queued back to back between
	// two events (no spin ahead of them): what a stream of launches sees,
	// launch gaps included.
	BackToBack time.Duration `json:"back_to_back_ns"`
	Iters      int           `json:"iters"`
	// Warmup is the number of untimed launches before them.
	Warmup int `json:"warmup"`
	// Sets is the number of input sets rotated so that repeated launches do
	// not read from L2.
	Sets int `json:"sets"`
	// Bytes is what the op must move through device memory (MinBytes).
	Bytes int64 `json:"bytes"`
	// Bandwidth is Bytes / Median.
	Bandwidth float64 `json:"bandwidth"`
	// CopyBandwidth is the device-to-device copy bandwidth measured in the
	// same worker (bytes read plus written per second).
	CopyBandwidth float64 `json:"copy_bandwidth"`
	Device        string  `json:"device"`
	// SMs is the device's multiprocessor count (the draw floor's issue
	// rate); DrawsPerSecond is Rows·Draws / Median for a case with draws.
	SMs            int     `json:"sms,omitempty"`
	DrawsPerSecond float64 `json:"draws_per_second,omitempty"`
}

// The floor of a counted draw (docs/PERF.md, "Floors"; its derivation in
// docs/perf-log.md, "Moved from docs/PERF.md (2026-11-28)"): about
// drawInstructions thread-instructions (Philox, pick, the guide, ~5
// search steps, the count) issued by 128 lanes an SM at the H100's
// drawClockHz.
const (
	drawInstructions = 150
	drawClockHz      = 1.98e9
)

// DrawFloorRate returns the draws per second at 100% issue on r's device
// (0 without draws or without the SM count).
func (r *BenchResult) DrawFloorRate() float64 {
	if r.Case.Draws <= 0 || r.SMs <= 0 {
		return 0
	}
	return float64(r.SMs) * 128 * drawClockHz / drawInstructions
}

// Ratio returns the achieved bandwidth as a fraction of the copy bandwidth.
func (r *BenchResult) Ratio() float64 {
	if r.CopyBandwidth == 0 {
		return 0
	}
	return r.Bandwidth / r.CopyBandwidth
}

// Floor returns the time the op's bytes take at the copy bandwidth, or for
// a case with draws the larger of that and its draws at DrawFloorRate.
func (r *BenchResult) Floor() time.Duration {
	if r.CopyBandwidth == 0 {
		return 0
	}
	floor := time.Duration(float64(r.Bytes) / r.CopyBandwidth * 1e9)
	if rate := r.DrawFloorRate(); rate > 0 {
		floor = max(floor, time.Duration(float64(r.Case.Rows)*float64(r.Case.Draws)/rate*1e9))
	}
	return floor
}

// ngramDraft is the draft length of the ngram_match benchmark.
const ngramDraft = 8

// fastDeployThreshold is FastDeploy's default threshold of a rule
// (INFER_WITH_REFERENCE_TOKENUM_THRESHOLD for ngram_match,
// SPEC_TOKENUM_THRESHOLD for hybrid_mtp_ngram), and whether it is the
// hybrid.
func fastDeployThreshold(sem engine.NgramSemantics) (threshold int64, hybrid bool) {
	if sem == engine.NgramFastDeployHybrid {
		return 1024, true
	}
	return 128, false
}

func (c *BenchCase) validate() error {
	switch c.DType {
	case engine.F32, engine.F16, engine.BF16:
	default:
		return fmt.Errorf("bench: dtype %s (want F32, F16 or BF16)", c.DType)
	}
	if c.Rows < 1 || c.Vocab < 1 && c.Op != engine.OpNgramMatch {
		return fmt.Errorf("bench: %d rows of %d tokens", c.Rows, c.Vocab)
	}
	switch c.Op {
	case engine.OpArgmax, engine.OpSoftmax, engine.OpRenorm, engine.OpSample:
	case engine.OpSpecVerify:
		if c.K < 1 {
			return fmt.Errorf("bench: spec_verify needs K >= 1")
		}
	case engine.OpSpecTreeVerify:
		if c.Nodes < 1 || c.Nodes > engine.MaxTreeNodes || c.TreeTopK < 1 {
			return fmt.Errorf("bench: spec_tree_verify needs 1 to %d nodes and a top-k of at least 1", engine.MaxTreeNodes)
		}
	case engine.OpNgramMatch:
		if c.PromptLen < 1 || c.GenLen < 1 {
			return fmt.Errorf("bench: ngram_match needs prompt and generated lengths")
		}
		switch c.NgramSemantics {
		case "", engine.NgramSampviz, engine.NgramFastDeploy, engine.NgramFastDeployHybrid:
		default:
			return fmt.Errorf("bench: ngram_semantics %q: %w", c.NgramSemantics, engine.ErrUnsupported)
		}
	default:
		return fmt.Errorf("bench: op %q: %w", c.Op, engine.ErrUnsupported)
	}
	if _, err := methodFlags(c.Method); err != nil {
		return err
	}
	if c.Draws < 0 || c.Draws > engine.MaxDraws || c.Draws > 0 && c.Op != engine.OpSample {
		return fmt.Errorf("bench: %d draws a row (sample only, at most %d)", c.Draws, engine.MaxDraws)
	}
	return nil
}

// MinBytes is the fewest bytes the op must move through device memory: each
// input element it needs read once, each output written once. For
// spec_verify that is every target row (each position's normaliser needs
// its whole row), the drafts, one draft-probability row per batch row (the
// residual at the stopping position) and the outputs.
func (c *BenchCase) MinBytes() int64 {
	b, v, s := int64(c.Rows), int64(c.Vocab), int64(c.DType.Size())
	switch c.Op {
	case engine.OpArgmax:
		return b*v*s + 4*b
	case engine.OpSoftmax:
		return b*v*s + 4*b*v + 4*b
	case engine.OpRenorm:
		return b*v*s + 4*b*v + 16*b
	case engine.OpSample:
		if c.Draws > 0 { // and the counts, written once
			return b*v*s + 4*b + 32*b + 4*b*v
		}
		return b*v*s + 4*b + 32*b
	case engine.OpSpecVerify:
		k := int64(c.K)
		n := b*(k+1)*v*s + 4*b*k + 4*b*(k+1) + 8*b + 32*b
		if c.DraftProbs {
			n += b*v*s + b*k*s
		}
		return n
	case engine.OpSpecTreeVerify:
		// Every node's target row (its normaliser needs it), the tree's
		// three int32 tensors, the outputs and the parameters; with draft
		// distributions, the rows of the nodes with two or more children
		// (their later siblings' thresholds sum over them), q(x) of every
		// other child, and one row for the stop node's residual.
		nodes := int64(c.Nodes)
		width := int64(benchTreeDepth(c.Nodes, c.TreeTopK) + 1)
		n := b*nodes*v*s + 12*b*nodes + 4*b*(2*width+1) + 32*b
		if c.DraftProbs {
			wide := int64(benchTreeWide(c.Nodes, c.TreeTopK))
			n += b*wide*v*s + b*nodes*s + b*v*s
		}
		return n
	case engine.OpNgramMatch:
		if c.NgramSemantics.FastDeploy() {
			// Also FastDeploy's state (four int32 arrays and the int64
			// max_dec_len), the current token's column and
			// seq_lens_this_time_out.
			return 4*b*int64(c.PromptLen+c.GenLen+2) + 24*b + 4*b*(ngramDraft+1) + 4*b
		}
		return 4*b*int64(c.PromptLen+c.GenLen+2) + 4*b*ngramDraft
	}
	return 0
}

// benchTree returns the links (first child, next sibling) of the first
// nodes nodes, breadth first, of the tree in which every node has topk
// children: SGLang's layout, a child's index above its parent's.
func benchTree(nodes, topk int) (next, sibling []int64) {
	next, sibling = make([]int64, nodes), make([]int64, nodes)
	for i := range next {
		next[i], sibling[i] = -1, -1
	}
	for c := 1; c < nodes; c++ {
		parent, rank := (c-1)/topk, (c-1)%topk
		if rank == 0 {
			next[parent] = int64(c)
		} else {
			sibling[c-1] = int64(c)
		}
	}
	return next, sibling
}

// benchTreeDepth is the depth of benchTree(nodes, topk).
func benchTreeDepth(nodes, topk int) int {
	depth := 0
	for c := nodes - 1; c > 0; c = (c - 1) / topk {
		depth++
	}
	return depth
}

// benchTreeWide is the number of nodes of benchTree(nodes, topk) with two
// or more children.
func benchTreeWide(nodes, topk int) int {
	wide := 0
	for u := 0; u*topk+1 < nodes; u++ {
		if min(topk, nodes-1-u*topk) >= 2 {
			wide++
		}
	}
	return wide
}

// benchSet is one set of device inputs and outputs of a case.
type benchSet struct {
	in, out map[string]uint64
}

// bench times c: it allocates enough input sets to exceed twice the L2
// (rotating among them), warms up, then times each launch between two
// events, with the launches queued behind a spinning kernel so that the
// host's launch gaps stay out of the numbers, and returns the median.
func (g *gpuExec) bench(c *BenchCase) (*BenchResult, error) {
	if err := c.validate(); err != nil {
		return nil, &wireError{Kind: wireInvalid, Message: err.Error()}
	}
	iters, warmup := c.Iters, c.Warmup
	if iters <= 0 {
		iters = 100
	}
	if warmup <= 0 {
		warmup = 10
	}
	var allocs []uint64
	defer func() {
		g.lib.synchronize()
		for _, h := range allocs {
			g.lib.free(h)
		}
	}()
	alloc := func(n int64) (uint64, error) {
		var h uint64
		if err := g.lib.check(g.lib.malloc(uint64(max(n, 256)), &h), "bench: allocate"); err != nil {
			return 0, err
		}
		allocs = append(allocs, h)
		return h, nil
	}
	upload := func(b []byte) (uint64, error) {
		h, err := alloc(int64(len(b)))
		if err != nil {
			return 0, err
		}
		if len(b) > 0 {
			err = g.lib.check(g.lib.htod(h, unsafe.Pointer(&b[0]), uint64(len(b))), "bench: upload")
		}
		return h, err
	}

	rows, vocab := c.Rows, c.Vocab
	dt := int32(svDType(c.DType))
	elem := int64(c.DType.Size())
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(vocab)))

	// Shared, small inputs: parameters, row lists, drafts.
	temp := c.Temperature
	topP := c.TopP
	if topP == 0 {
		topP = 1
	}
	rp := &rowParams{
		temperature: make([]float32, rows), topK: make([]int32, rows), topP: make([]float32, rows),
		minP: make([]float32, rows), seed: make([]uint64, rows), offset: make([]uint64, rows),
	}
	for r := range rows {
		rp.temperature[r], rp.topK[r], rp.topP[r], rp.minP[r] = float32(temp), int32(c.TopK), float32(topP), float32(c.MinP)
		rp.seed[r], rp.offset[r] = rng.Uint64(), uint64(r)
	}
	flags, err := methodFlags(c.Method)
	if err != nil {
		return nil, err
	}
	if c.TopK > 0 && c.TopK < vocab || topP < 1 || c.MinP > 0 {
		flags |= flagHasFilters
	}
	flags |= hints(rp, flags, engine.TopKFirst, vocab)
	params, err := upload(rp.bytes())
	if err != nil {
		return nil, err
	}
	rowList := make([]byte, 4*rows)
	for r := range rows {
		binary.LittleEndian.PutUint32(rowList[4*r:], uint32(r))
	}
	rowIdx, err := upload(rowList)
	if err != nil {
		return nil, err
	}
	nGreedy, nSampled := 0, rows
	if temp == 0 {
		nGreedy, nSampled = rows, 0
	}

	// spec_tree_verify: one tree for every row and set, with random
	// candidates.
	var treeBuf uint64
	treeWidth := 0
	var treeTokens []int32
	var treeNext, treeSibling []int64
	if c.Op == engine.OpSpecTreeVerify {
		if g.lib.specTreeVerify == nil {
			return nil, &wireError{Kind: wireUnsupported, Message: errNoTreeKernel.Error()}
		}
		next, sibling := benchTree(c.Nodes, c.TreeTopK)
		treeNext, treeSibling = next, sibling
		tree, err := engine.ParseTree(next, sibling)
		if err != nil {
			return nil, &wireError{Kind: wireInvalid, Message: "bench: " + err.Error()}
		}
		treeWidth = tree.MaxDepth + 1
		trees := make([]*engine.Tree, rows)
		tokens := make([]int32, rows*c.Nodes)
		for r := range rows {
			trees[r] = tree
			for node := 1; node < c.Nodes; node++ {
				tokens[r*c.Nodes+node] = int32(rng.IntN(vocab))
			}
		}
		if treeBuf, err = upload(treeBuffer(trees, tokens, c.Nodes)); err != nil {
			return nil, err
		}
		treeTokens = tokens
	}

	// Per-set inputs and outputs.
	var inBytes int64
	switch c.Op {
	case engine.OpSpecTreeVerify:
		inBytes = int64(rows) * int64(c.Nodes) * int64(vocab) * elem
		if c.DraftProbs {
			inBytes *= 2
		}
	case engine.OpSpecVerify:
		inBytes = int64(rows) * int64(c.K+1) * int64(vocab) * elem
		if c.DraftProbs {
			inBytes += int64(rows) * int64(c.K) * int64(vocab) * elem
		}
	case engine.OpNgramMatch:
		inBytes = 4 * int64(rows) * int64(c.PromptLen+c.GenLen)
	default:
		inBytes = int64(rows) * int64(vocab) * elem
	}
	sets := 1
	if l2 := g.info.L2Bytes; l2 > 0 && inBytes < 4*l2 {
		sets = int(min((4*l2+inBytes-1)/inBytes, 256))
	}
	var setList []benchSet
	for s := range sets {
		set := benchSet{in: map[string]uint64{}, out: map[string]uint64{}}
		fill := func(name string, n int64, scale float32) error {
			h, err := alloc(n * elem)
			if err != nil {
				return err
			}
			set.in[name] = h
			return g.lib.check(g.lib.fillRandom(h, dt, uint64(n), uint64(1+s)*0x9e3779b97f4a7c15, scale), "bench: random fill")
		}
		output := func(name string, n int64) error {
			h, err := alloc(n)
			set.out[name] = h
			return err
		}
		switch c.Op {
		case engine.OpArgmax, engine.OpSample:
			if err := fill("logits", int64(rows)*int64(vocab), 2); err != nil {
				return nil, err
			}
			if err := output("tokens", 4*int64(rows)); err != nil {
				return nil, err
			}
			if c.Draws > 0 {
				if err := output("sample_counts", 4*int64(rows)*int64(vocab)); err != nil {
					return nil, err
				}
			}
		case engine.OpSoftmax, engine.OpRenorm:
			if err := fill("logits", int64(rows)*int64(vocab), 2); err != nil {
				return nil, err
			}
			if err := output("probs", 4*int64(rows)*int64(vocab)); err != nil {
				return nil, err
			}
		case engine.OpSpecVerify:
			if err := fill("target", int64(rows)*int64(c.K+1)*int64(vocab), 2); err != nil {
				return nil, err
			}
			if c.DraftProbs {
				if err := fill("qprobs", int64(rows)*int64(c.K)*int64(vocab), 1/float32(vocab)); err != nil {
					return nil, err
				}
			}
			drafts := make([]byte, 4*rows*c.K)
			for i := range rows * c.K {
				binary.LittleEndian.PutUint32(drafts[4*i:], uint32(rng.IntN(vocab)))
			}
			h, err := upload(drafts)
			if err != nil {
				return nil, err
			}
			set.in["drafts"] = h
			for name, n := range map[string]int64{"tokens": int64(rows * (c.K + 1)), "emitted": int64(rows), "accepted": int64(rows)} {
				if err := output(name, 4*n); err != nil {
					return nil, err
				}
			}
		case engine.OpSpecTreeVerify:
			n := int64(rows) * int64(c.Nodes) * int64(vocab)
			if err := fill("target", n, 2); err != nil {
				return nil, err
			}
			if c.DraftProbs {
				if err := fill("qprobs", n, 1/float32(vocab)); err != nil {
					return nil, err
				}
			}
			for name, n := range map[string]int64{"path": int64(rows * treeWidth), "tokens": int64(rows * treeWidth), "accepted": int64(rows)} {
				if err := output(name, 4*n); err != nil {
					return nil, err
				}
			}
		case engine.OpNgramMatch:
			ids := func(n int) []byte {
				b := make([]byte, 4*n)
				for i := range n {
					binary.LittleEndian.PutUint32(b[4*i:], uint32(rng.IntN(64)))
				}
				return b
			}
			lens := func(v int) []byte {
				b := make([]byte, 4*rows)
				for r := range rows {
					binary.LittleEndian.PutUint32(b[4*r:], uint32(v))
				}
				return b
			}
			in := map[string][]byte{"input_ids": ids(rows * c.PromptLen), "pre_ids": ids(rows * c.GenLen),
				"input_len": lens(c.PromptLen), "step_idx": lens(c.GenLen)}
			draftCols := int64(ngramDraft)
			if c.NgramSemantics.FastDeploy() {
				_, hybrid := fastDeployThreshold(c.NgramSemantics)
				now := 1
				if hybrid {
					now = 2
				}
				decCap := make([]byte, 8*rows)
				for r := range rows {
					binary.LittleEndian.PutUint64(decCap[8*r:], uint64(engine.NoDecCap))
				}
				in["step_idx"] = lens(c.GenLen - 1)
				in["seq_lens_encoder"], in["seq_lens_decoder"], in["seq_lens_this_time"] = lens(0), lens(1), lens(now)
				in["draft_token_num"], in["max_dec_len"] = lens(ngramDraft), decCap
				draftCols++
				if err := output("seq_lens_this_time_out", 4*int64(rows)); err != nil {
					return nil, err
				}
			}
			for name, b := range in {
				h, err := upload(b)
				if err != nil {
					return nil, err
				}
				set.in[name] = h
			}
			if err := output("draft_out", 4*int64(rows)*draftCols); err != nil {
				return nil, err
			}
		}
		setList = append(setList, set)
	}
	if c.Inputs != "" {
		if err := g.writeBenchInputs(c, setList, treeTokens, treeNext, treeSibling); err != nil {
			return nil, &wireError{Kind: wireInvalid, Message: err.Error()}
		}
	}

	launch := func(set benchSet) int32 {
		l := g.lib
		switch c.Op {
		case engine.OpArgmax:
			return l.argmax(dt, set.in["logits"], int32(rows), int32(vocab), 0, 0, 0, set.out["tokens"])
		case engine.OpSoftmax:
			return l.softmax(dt, set.in["logits"], int32(rows), int32(vocab), params, set.out["probs"])
		case engine.OpRenorm:
			return l.renorm(dt, set.in["logits"], int32(rows), int32(vocab), params, int32(flags), set.out["probs"])
		case engine.OpSample:
			if c.Draws > 0 {
				return l.sampleCounts(dt, set.in["logits"], int32(rows), int32(vocab), params, int32(flags), rowIdx,
					int32(nGreedy), int32(nSampled), set.out["tokens"], int32(c.Draws), set.out["sample_counts"])
			}
			return l.sample(dt, set.in["logits"], int32(rows), int32(vocab), params, int32(flags), rowIdx,
				int32(nGreedy), int32(nSampled), set.out["tokens"], 0, 0)
		case engine.OpSpecVerify:
			f := int32(flags) | dt<<specTargetShift | dt<<specDraftShift
			return l.specVerify(set.in["target"], int32(rows), int32(c.K), int32(vocab), params, f, set.in["drafts"],
				set.in["qprobs"], 1, set.out["tokens"], set.out["emitted"], set.out["accepted"], 0, 0)
		case engine.OpSpecTreeVerify:
			f := int32(flags) | dt<<specTargetShift | dt<<specDraftShift
			return l.specTreeVerify(set.in["target"], int32(rows), int32(c.Nodes), int32(vocab), int32(treeWidth), params, f,
				treeBuf, set.in["qprobs"], 1, set.out["path"], set.out["tokens"], set.out["accepted"], 0, 0)
		case engine.OpNgramMatch:
			if c.NgramSemantics.FastDeploy() {
				threshold, hybrid := fastDeployThreshold(c.NgramSemantics)
				h := int32(0)
				if hybrid {
					h = 1
				}
				return l.ngramFD(set.in["input_ids"], int32(c.PromptLen), set.in["input_len"], set.in["pre_ids"], int32(c.GenLen),
					set.in["step_idx"], set.in["seq_lens_encoder"], set.in["seq_lens_decoder"], set.in["seq_lens_this_time"],
					set.in["max_dec_len"], set.in["draft_token_num"], int32(rows), 3, 1, ngramDraft, threshold, h,
					set.out["draft_out"], set.out["seq_lens_this_time_out"])
			}
			return l.ngram(set.in["input_ids"], int32(c.PromptLen), set.in["input_len"], set.in["pre_ids"], int32(c.GenLen),
				set.in["step_idx"], int32(rows), 3, ngramDraft, 1<<20, set.out["draft_out"])
		}
		return svInvalid
	}
	for i := range warmup {
		if err := g.lib.check(launch(setList[i%sets]), "bench: "+string(c.Op)); err != nil {
			return nil, err
		}
	}
	if err := g.lib.check(g.lib.synchronize(), "bench: warm-up"); err != nil {
		return nil, err
	}
	// Time in batches queued behind a 2 ms spin, so the device never waits
	// for the host between the events of one launch.
	const batch = 32
	if err := g.lib.check(g.lib.eventsReserve(2*batch), "bench: events"); err != nil {
		return nil, err
	}
	times := make([]float64, 0, iters)
	for done := 0; done < iters; {
		n := min(batch, iters-done)
		if err := g.lib.check(g.lib.delay(2_000_000), "bench: delay"); err != nil {
			return nil, err
		}
		for i := range n {
			if err := g.lib.check(g.lib.eventRecord(int32(2*i)), "bench: event"); err != nil {
				return nil, err
			}
			if err := g.lib.check(launch(setList[(done+i)%sets]), "bench: "+string(c.Op)); err != nil {
				return nil, err
			}
			if err := g.lib.check(g.lib.eventRecord(int32(2*i+1)), "bench: event"); err != nil {
				return nil, err
			}
		}
		if err := g.lib.check(g.lib.synchronize(), "bench: "+string(c.Op)); err != nil {
			return nil, err
		}
		for i := range n {
			var ms float32
			if err := g.lib.check(g.lib.eventElapsed(int32(2*i), int32(2*i+1), &ms), "bench: event time"); err != nil {
				return nil, err
			}
			times = append(times, float64(ms))
		}
		done += n
	}
	// Back to back: the same launches between one pair of events.
	if err := g.lib.check(g.lib.eventRecord(0), "bench: event"); err != nil {
		return nil, err
	}
	for i := range iters {
		if err := g.lib.check(launch(setList[i%sets]), "bench: "+string(c.Op)); err != nil {
			return nil, err
		}
	}
	if err := g.lib.check(g.lib.eventRecord(1), "bench: event"); err != nil {
		return nil, err
	}
	var total float32
	if err := g.lib.check(g.lib.eventElapsed(0, 1, &total), "bench: event time"); err != nil {
		return nil, err
	}
	sort.Float64s(times)
	med := times[len(times)/2]
	res := &BenchResult{
		Case:          *c,
		Median:        time.Duration(med * 1e6),
		Min:           time.Duration(times[0] * 1e6),
		BackToBack:    time.Duration(float64(total) * 1e6 / float64(iters)),
		Iters:         iters,
		Warmup:        warmup,
		Sets:          sets,
		Bytes:         c.MinBytes(),
		CopyBandwidth: g.info.CopyBandwidth,
		Device:        g.info.Name,
		SMs:           g.info.SMs,
	}
	res.Case.Inputs = ""
	if med > 0 {
		res.Bandwidth = float64(res.Bytes) / (med * 1e-3)
		if c.Draws > 0 {
			res.DrawsPerSecond = float64(rows) * float64(c.Draws) / (med * 1e-3)
		}
	}
	if math.IsNaN(res.Bandwidth) {
		res.Bandwidth = 0
	}
	return res, nil
}
