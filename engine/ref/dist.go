package ref

import (
	"container/heap"
	"fmt"

	"github.com/sampviz/sampviz/engine"
)

// Class says what the filters do to a token, as far as the float64 reference
// can tell (SEMANTICS.md "Boundary tokens"). The order is by severity: a
// token takes the most severe class any filter gives it.
type Class uint8

const (
	// Kept tokens survive every filter in any correct implementation.
	Kept Class = iota
	// Boundary tokens sit at a filter boundary (a tie, or within eps of a
	// cut): an implementation may keep or drop them.
	Boundary
	// Dropped tokens are filtered out, masked, or have zero probability, in
	// any correct implementation.
	Dropped
)

// String returns "kept", "boundary" or "dropped".
func (c Class) String() string {
	switch c {
	case Kept:
		return "kept"
	case Boundary:
		return "boundary"
	case Dropped:
		return "dropped"
	}
	return fmt.Sprintf("Class(%d)", c)
}

// RuleParameter is the rule of a row made invalid by its parameters (a
// negative or NaN temperature) rather than by its logits.
const RuleParameter = engine.RuleParameter

// Dist is the reference distribution of one row.
//
// Probs is what a correct kernel outputs: the softmax, or the renormalised
// filtered distribution. Base is the unfiltered softmax (the same slice as
// Probs when no filter is active). Class classes every token. The cuts are in
// Base's units, for drawing the CDF of Base sorted by decreasing probability:
// TopKProb is the probability of the k-th most probable token, TopPCut is the
// cumulative mass at which top-p cuts (top_p times the top-k mass under
// top_k_first, times the total mass otherwise), MinPThreshold is min_p times
// the greatest probability; each is 0 when its filter is off.
//
// A row without a distribution has Invalid set (what is wrong, for a person:
// "input logits contain NaN at 2 of 32000 tokens, first at token 17") with the
// rule it breaks, and empty slices.
type Dist struct {
	Invalid     string
	InvalidRule engine.Rule

	Probs []float64
	Base  []float64
	Class []Class
	// Argmax is the lowest index of the most probable token (-1 when invalid).
	Argmax int

	TopKProb      float64
	TopPCut       float64
	MinPThreshold float64

	// ByPattern is set when every token whose logit has the same 16-bit
	// pattern has the same probability, base and class (a BF16 or F16 row
	// not split by a top-k tie rule), so that a judge may measure the row by
	// distinct logit rather than by token.
	ByPattern bool

	// probsBuf, baseBuf and classBuf keep the memory a Workspace reuses.
	probsBuf, baseBuf []float64
	classBuf          []Class
}

// prepare sizes d for a valid row of v tokens; Base gets its own memory only
// when filtered.
func (d *Dist) prepare(v int, filtered bool) {
	*d = Dist{
		Argmax:   -1,
		probsBuf: resize(d.probsBuf, v),
		baseBuf:  d.baseBuf,
		classBuf: resize(d.classBuf, v),
	}
	d.Probs, d.Base, d.Class = d.probsBuf, d.probsBuf, d.classBuf
	if filtered {
		d.baseBuf = resize(d.baseBuf, v)
		d.Base = d.baseBuf
	}
}

// invalidate marks d as a row without a distribution.
func (d *Dist) invalidate(reason string, rule engine.Rule) {
	*d = Dist{
		Invalid:     reason,
		InvalidRule: rule,
		Argmax:      -1,
		Probs:       d.probsBuf[:0],
		Base:        d.probsBuf[:0],
		Class:       d.classBuf[:0],
		probsBuf:    d.probsBuf,
		baseBuf:     d.baseBuf,
		classBuf:    d.classBuf,
	}
}

// Valid reports whether the row has a distribution.
func (d *Dist) Valid() bool { return d.Invalid == "" }

// Top returns the indices of the n most probable tokens by Base, most
// probable first, ties by lower index (fewer when the row is shorter).
func (d *Dist) Top(n int) []int {
	n = min(n, len(d.Base))
	if n <= 0 {
		return nil
	}
	h := &topHeap{base: d.Base}
	for i := range d.Base {
		if h.Len() < n {
			heap.Push(h, i)
		} else if h.less(h.idx[0], i) {
			h.idx[0] = i
			heap.Fix(h, 0)
		}
	}
	out := make([]int, h.Len())
	for k := len(out) - 1; k >= 0; k-- {
		out[k] = heap.Pop(h).(int)
	}
	return out
}

// topHeap is a min-heap of token indices by (probability, then higher index
// first), so its root is the weakest of the current top n.
type topHeap struct {
	base []float64
	idx  []int
}

// less orders i before j when i is less probable, or as probable with a
// higher index.
func (h *topHeap) less(i, j int) bool {
	if h.base[i] != h.base[j] {
		return h.base[i] < h.base[j]
	}
	return i > j
}
func (h *topHeap) Len() int           { return len(h.idx) }
func (h *topHeap) Less(a, b int) bool { return h.less(h.idx[a], h.idx[b]) }
func (h *topHeap) Swap(a, b int)      { h.idx[a], h.idx[b] = h.idx[b], h.idx[a] }
func (h *topHeap) Push(x any)         { h.idx = append(h.idx, x.(int)) }
func (h *topHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// Logits is one row of logits as stored: elements [Offset, Offset+Len) of
// Tensor, read in its own dtype. Name says what they are in messages
// ("" reads as "input logits").
type Logits struct {
	Tensor *engine.Tensor
	Offset int
	Len    int
	Name   string
}

// name returns what messages call x.
func (x Logits) name() string {
	if x.Name == "" {
		return "input logits"
	}
	return x.Name
}

// RowLogits returns row r of run.Logits.
func RowLogits(run *engine.Run, r int) Logits {
	v := run.Vocab()
	return Logits{Tensor: run.Logits, Offset: r * v, Len: v}
}

// TargetLogits returns position i of row r of run.TargetLogits (i = K is the
// bonus position).
func TargetLogits(run *engine.Run, r, i int) Logits {
	t := run.TargetLogits
	if t == nil {
		return Logits{}
	}
	v := run.Vocab()
	return Logits{Tensor: t, Offset: (r*t.Dim(1) + i) * v, Len: v, Name: fmt.Sprintf("target logits at position %d", i)}
}

// check returns why x cannot be read, or "".
func (x Logits) check() string {
	switch {
	case x.Tensor == nil:
		return "the run has no logits"
	case !x.Tensor.DType.IsFloat():
		return fmt.Sprintf("logits have dtype %v, not a float dtype", x.Tensor.DType)
	case x.Len <= 0:
		return "the row has no tokens"
	case x.Offset < 0 || (x.Offset+x.Len)*x.Tensor.DType.Size() > len(x.Tensor.Data):
		return fmt.Sprintf("elements [%d, %d) are outside the logits tensor", x.Offset, x.Offset+x.Len)
	}
	return ""
}

// Temperature returns row r's temperature (1 when the run has none for it).
func Temperature(run *engine.Run, r int) float64 {
	if r >= 0 && r < len(run.Params.Temperature) {
		return run.Params.Temperature[r]
	}
	return 1
}

// Greedy reports whether temperature t makes a row greedy: t rounds to 0 in
// float32, the precision kernels receive it in.
func Greedy(t float64) bool { return float32(t) == 0 }

// rowOf returns row r of run.Logits, or an unreadable row when r is outside
// the batch (Compute then reports it).
func rowOf(run *engine.Run, r int) Logits {
	if r < 0 || r >= run.Rows() {
		return Logits{Tensor: run.Logits, Offset: -1, Len: run.Vocab()}
	}
	return RowLogits(run, r)
}

// Compute returns the reference of one row of logits at temperature t with
// filters f (NoFilter for softmax), strict or native, using a fresh
// Workspace. Callers computing many rows keep a Workspace instead.
func Compute(x Logits, t float64, f Filter, native bool) Dist {
	var ws Workspace
	var d Dist
	ws.Compute(&d, x, t, f, native)
	return d
}

// TopIndices returns the indices of the n largest positive values of x,
// largest first, ties by lower index (nil for nil x).
func TopIndices(x []float64, n int) []int {
	var top []int
	for i, v := range x {
		if !(v > 0) || len(top) == n && v <= x[top[n-1]] {
			continue
		}
		j := len(top)
		if j < n {
			top = append(top, i)
		} else {
			j = n - 1
		}
		for j > 0 && x[top[j-1]] < v {
			top[j] = top[j-1]
			j--
		}
		top[j] = i
	}
	return top
}
