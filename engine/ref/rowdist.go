package ref

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
)

// Workspace holds the scratch memory of Compute, so that a caller computing
// many rows allocates once. The zero value is ready; a Workspace is not safe
// for concurrent use. It remembers the counts of the last 16-bit row it read
// (the strict and native references of a row count it once), so, as
// everywhere (engine.Tensor), logits must not change while they are read.
type Workspace struct {
	sum exactSum
	g   groups

	// The simple path: one float64 per element; unit is the softmax at
	// temperature 1 of a row filtered before its temperature.
	x, w, unit []float64
	gid        []int32
	order      []int32

	// The fast path for 16-bit logits, allocated on first use.
	half *halfTables
}

// Compute fills d with the reference of one row of logits at temperature t
// with filters f (NoFilter for softmax), strict or native (SEMANTICS.md
// "Reference semantics"), reusing d's memory. A row that cannot be read or
// has no distribution leaves d invalid.
func (ws *Workspace) Compute(d *Dist, x Logits, t float64, f Filter, native bool) {
	if msg := x.check(); msg != "" {
		d.invalidate(msg, RuleParameter)
		return
	}
	// Kernels receive the temperature as float32 (SEMANTICS.md): a row is
	// greedy when it rounds to 0, and one that overflows is no temperature.
	if math.IsNaN(t) || t < 0 || math.IsInf(float64(float32(t)), 0) {
		d.invalidate(fmt.Sprintf("temperature %s is not a temperature (want 0 for greedy, or positive and finite in float32)", engine.FormatParam(t)), RuleParameter)
		return
	}
	if Greedy(t) {
		ws.greedy(d, x)
		return
	}
	switch x.Tensor.DType {
	case engine.BF16, engine.F16:
		if f.atUnitTemperature(x.Len, t) {
			ws.computeSimple(d, x, t, f, native) // two distributions per row
			break
		}
		ws.computeHalf(d, x, t, f, native)
	default:
		ws.computeSimple(d, x, t, f, native)
	}
}

// decode reads x into ws.x as float64 (exact for every float dtype) and
// reports why the row has no distribution, or "".
func (ws *Workspace) decode(d *Dist, x Logits) bool {
	ws.x = resize(ws.x, x.Len)
	x.Tensor.Floats64(x.Offset, ws.x)
	if msg, rule := oddReason(x, ws.x); msg != "" {
		d.invalidate(msg, rule)
		return false
	}
	return true
}

// oddReason says why the row x, read into xs, has no distribution
// (invalidReason), or "".
func oddReason(x Logits, xs []float64) (string, engine.Rule) {
	nan, inf, masked, first := 0, 0, 0, -1
	for i, v := range xs {
		switch {
		case math.IsNaN(v):
			nan++
		case math.IsInf(v, 1):
			inf++
		case math.IsInf(v, -1):
			masked++
			continue
		default:
			continue
		}
		if first < 0 {
			first = i
		}
	}
	return invalidReason(x, nan, inf, masked, first)
}

// invalidReason says why a row with nan NaN, inf +Inf and masked -inf
// logits (the first NaN or +Inf at first) has no distribution, or "".
func invalidReason(x Logits, nan, inf, masked, first int) (string, engine.Rule) {
	switch {
	case nan > 0 && inf > 0:
		return fmt.Sprintf("%s contain NaN at %d and +Inf at %d of %d tokens, first at token %d", x.name(), nan, inf, x.Len, first), engine.RuleNaN
	case nan > 0:
		return fmt.Sprintf("%s contain NaN at %d of %d tokens, first at token %d", x.name(), nan, x.Len, first), engine.RuleNaN
	case inf > 0:
		return fmt.Sprintf("%s contain +Inf at %d of %d tokens, first at token %d", x.name(), inf, x.Len, first), engine.RuleInf
	case masked == x.Len:
		return fmt.Sprintf("%s are all -inf (every token masked)", x.name()), engine.RuleMasked
	}
	return "", ""
}

// overflowReason describes scaled logits that overflowed the input dtype.
func overflowReason(x Logits, t float64, n, first int) string {
	return fmt.Sprintf("%s divided by T = %s overflow %v at %d of %d tokens, first at token %d", x.name(), engine.FormatParam(t), x.Tensor.DType, n, x.Len, first)
}

// greedy fills d for temperature 0: all mass on the lowest index of the
// maximum (Kept); the other tied maxima are Boundary, the rest Dropped.
// Filters cannot change a one-hot distribution and are not applied.
func (ws *Workspace) greedy(d *Dist, x Logits) {
	if !ws.decode(d, x) {
		return
	}
	m := math.Inf(-1)
	for _, v := range ws.x {
		m = max(m, v)
	}
	d.prepare(x.Len, false)
	for i, v := range ws.x {
		switch {
		case v != m:
			d.Probs[i], d.Class[i] = 0, Dropped
		case d.Argmax < 0:
			d.Probs[i], d.Class[i] = 1, Kept
			d.Argmax = i
		default:
			d.Probs[i], d.Class[i] = 0, Boundary
		}
	}
}

// computeSimple is the obviously correct path: one exp per element, then, if
// a filter is active, a sort of the elements by probability into groups.
func (ws *Workspace) computeSimple(d *Dist, x Logits, t float64, f Filter, native bool) {
	if !ws.decode(d, x) {
		return
	}
	v := x.Len
	xs := ws.x
	// Under temperature_order last the filters see the softmax at
	// temperature 1 (unit); the result is still the softmax at t, strict or
	// native, restricted to what they keep.
	unit := f.atUnitTemperature(v, t)
	if unit {
		ws.unit = ws.unitProbs(ws.unit, xs)
	}
	if native {
		n, first := 0, -1
		for i, xi := range xs {
			y := nativeScale(xi, t, x.Tensor.DType)
			if overflows(xi, y) {
				n++
				if first < 0 {
					first = i
				}
			}
			xs[i] = y
		}
		if n > 0 {
			d.invalidate(overflowReason(x, t, n, first), engine.RuleInf)
			return
		}
		t = 1 // the scaled logits are the softmax's input
	}
	m := math.Inf(-1)
	for _, xi := range xs {
		m = max(m, xi)
	}
	ws.w = resize(ws.w, v)
	ws.sum.reset()
	for i, xi := range xs {
		ws.w[i] = weight(xi, m, t)
		ws.sum.add(ws.w[i])
	}
	z := ws.sum.value()

	filtered := f.Active(v)
	d.prepare(v, filtered)
	for i, w := range ws.w {
		d.Base[i] = w / z
	}
	if !filtered {
		for i, p := range d.Base {
			d.Class[i] = Kept
			if p == 0 {
				d.Class[i] = Dropped
			}
			if d.Argmax < 0 || p > d.Base[d.Argmax] {
				d.Argmax = i
			}
		}
		return
	}

	// Group the tokens by probability, most probable first.
	ws.order = resize(ws.order, v)
	for i := range ws.order {
		ws.order[i] = int32(i)
	}
	base := d.Base
	if unit {
		base = ws.unit
	}
	slices.SortFunc(ws.order, func(a, b int32) int {
		switch {
		case base[a] > base[b]:
			return -1
		case base[a] < base[b]:
			return 1
		}
		return int(a - b)
	})
	g := &ws.g
	g.reset()
	ws.gid = resize(ws.gid, v)
	for _, i := range ws.order {
		g.push(base[i], 1)
		ws.gid[i] = int32(len(g.p) - 1)
	}
	g.decide(f, v, &ws.sum)

	// Renormalise over the kept tokens: w_i over their total weight.
	ws.sum.reset()
	seen := 0
	for i, gi := range ws.gid {
		if !g.keep[gi] {
			continue
		}
		if int(gi) == g.split {
			if seen >= g.splitAt {
				continue
			}
			seen++
		}
		ws.sum.add(ws.w[i])
	}
	zKept := ws.sum.value()
	seen = 0
	for i, gi := range ws.gid {
		c, keep := g.class[gi], g.keep[gi]
		if int(gi) == g.split {
			if seen >= g.splitAt {
				c, keep = g.restClass(), false
			}
			seen++
		}
		d.Class[i] = c
		d.Probs[i] = 0
		if keep {
			d.Probs[i] = ws.w[i] / zKept
		}
	}
	d.Argmax = int(ws.order[0])
	d.TopKProb, d.TopPCut, d.MinPThreshold = g.topKProb, g.topPCut, g.minPThreshold
	if unit {
		ws.cutsOnBase(d, f, t)
	}
}

// unitProbs returns the softmax of the decoded logits xs at temperature 1,
// in buf.
func (ws *Workspace) unitProbs(buf, xs []float64) []float64 {
	buf = resize(buf, len(xs))
	m := math.Inf(-1)
	for _, xi := range xs {
		m = max(m, xi)
	}
	ws.sum.reset()
	for i, xi := range xs {
		buf[i] = weight(xi, m, 1)
		ws.sum.add(buf[i])
	}
	z := ws.sum.value()
	for i := range buf {
		buf[i] /= z
	}
	return buf
}

// cutsOnBase moves the cuts of a row whose filters were decided at
// temperature 1 (ws.g, ws.gid and ws.order hold them) to d.Base, the
// softmax at t, where the row page draws them: the top-k cut is the k-th
// token's probability, the min-p line min_p^(1/t) of the greatest (the
// same tokens, as x_i - max >= ln min_p), and the top-p cut the mass of
// the tokens top-p keeps.
func (ws *Workspace) cutsOnBase(d *Dist, f Filter, t float64) {
	g := &ws.g
	groupBase := func(want float64) float64 {
		for _, i := range ws.order {
			if g.p[ws.gid[i]] == want {
				return d.Base[i]
			}
		}
		return 0
	}
	if d.TopKProb > 0 {
		d.TopKProb = groupBase(d.TopKProb)
	}
	if d.MinPThreshold > 0 {
		d.MinPThreshold = math.Pow(f.MinP, 1/t) * d.Base[ws.order[0]]
	}
	if d.TopPCut > 0 {
		cut, ahead, mass := d.TopPCut, 0.0, 0.0
		last := int32(-1)
		for _, i := range ws.order {
			gi := ws.gid[i]
			if gi != last {
				if ahead >= cut && last >= 0 {
					break
				}
				last = gi
			}
			ahead += g.p[gi]
			mass += d.Base[i]
		}
		d.TopPCut = mass
	}
}

// halfTables are the fast path's tables, indexed by 16-bit pattern. Only the
// entries of patterns present in the current row are meaningful.
type halfTables struct {
	counts [1 << 16]int32
	w      [1 << 16]float64 // weight
	base   [1 << 16]float64 // unfiltered probability
	probs  [1 << 16]float64 // renormalised probability
	class  [1 << 16]Class
	group  [1 << 16]int32
	// byValue lists the patterns of the row, greatest value first (NaN
	// patterns excluded), nan counts its NaN, and present is byValue as the
	// row's computation orders it.
	byValue, present []uint16
	nan              int
	// lastData and lastDType are the row the counts are of: the strict and
	// the native reference of one row count it once. Holding the slice keeps
	// its memory from being reused for another row while it is remembered.
	lastData  []byte
	lastDType engine.DType
}

// counted reports whether the tables hold the counts of data in dtype.
func (h *halfTables) counted(data []byte, dtype engine.DType) bool {
	return len(data) > 0 && len(h.lastData) == len(data) && &h.lastData[0] == &data[0] && h.lastDType == dtype
}

// count fills count, byValue and nan from one row of 16-bit patterns.
func (h *halfTables) count(data []byte, format halfFormat) {
	clear(h.counts[:])
	for i := 0; i < len(data); i += 2 {
		h.counts[binary.LittleEndian.Uint16(data[i:])]++
	}
	h.byValue = h.byValue[:0]
	h.nan = 0
	for k := 1<<16 - 1; k >= 0; k-- {
		b := patternAt(k)
		switch c := h.counts[b]; {
		case c == 0:
		case format.isNaN(b):
			h.nan += int(c)
		default:
			h.byValue = append(h.byValue, b)
		}
	}
	h.lastData = data
	h.lastDType = format.dtype
}

// halfFormat describes a 16-bit float format: its +Inf and -Inf patterns and
// the mask of its exponent.
type halfFormat struct {
	dtype                   engine.DType
	posInf, negInf, expMask uint16
	decode                  func(uint16) float32
}

var (
	bf16Format = halfFormat{dtype: engine.BF16, posInf: 0x7f80, negInf: 0xff80, expMask: 0x7f80, decode: engine.BF16ToF32}
	f16Format  = halfFormat{dtype: engine.F16, posInf: 0x7c00, negInf: 0xfc00, expMask: 0x7c00, decode: engine.F16ToF32}
)

// isNaN reports whether pattern b is a NaN of the format.
func (h halfFormat) isNaN(b uint16) bool {
	return b&h.expMask == h.expMask && b&^(h.expMask|0x8000) != 0
}

// patternAt returns the pattern with order key k: keys grow with the value
// (sign-magnitude patterns, negative ones reversed).
func patternAt(k int) uint16 {
	if k >= 0x8000 {
		return uint16(k ^ 0x8000)
	}
	return ^uint16(k)
}

// computeHalf is the fast path for BF16 and F16 logits: a row holds at most
// 65536 distinct values, so it counts them, computes one exp per distinct
// value, and groups the distinct values rather than sorting the elements. It
// gives the same bits as computeSimple.
func (ws *Workspace) computeHalf(d *Dist, x Logits, t float64, f Filter, native bool) {
	if ws.half == nil {
		ws.half = new(halfTables)
	}
	h := ws.half
	format := bf16Format
	if x.Tensor.DType == engine.F16 {
		format = f16Format
	}
	v := x.Len
	data := x.Tensor.Data[2*x.Offset : 2*(x.Offset+v)]

	if !h.counted(data, x.Tensor.DType) {
		h.count(data, format)
	}
	h.present = append(h.present[:0], h.byValue...)
	nan := h.nan
	inf, masked := int(h.counts[format.posInf]), int(h.counts[format.negInf])
	if nan > 0 || inf > 0 || masked == v {
		first := -1
		for i := 0; i < len(data) && first < 0 && nan+inf > 0; i += 2 {
			if b := binary.LittleEndian.Uint16(data[i:]); b == format.posInf || format.isNaN(b) {
				first = i / 2
			}
		}
		msg, rule := invalidReason(x, nan, inf, masked, first)
		d.invalidate(msg, rule)
		return
	}

	// One weight per distinct value.
	value := func(b uint16) float64 { return float64(format.decode(b)) }
	m := value(h.present[0])
	if native {
		n := 0
		my := math.Inf(-1)
		for _, b := range h.present {
			y := nativeScale(value(b), t, x.Tensor.DType)
			if overflows(value(b), y) {
				n += int(h.counts[b])
			}
			h.w[b] = y // the scaled logit, for now
			my = max(my, y)
		}
		if n > 0 {
			first := 0
			for i := 0; i < len(data); i += 2 {
				b := binary.LittleEndian.Uint16(data[i:])
				if overflows(value(b), h.w[b]) {
					first = i / 2
					break
				}
			}
			d.invalidate(overflowReason(x, t, n, first), engine.RuleInf)
			return
		}
		for _, b := range h.present {
			h.w[b] = weight(h.w[b], my, 1)
		}
	} else {
		for _, b := range h.present {
			h.w[b] = weight(value(b), m, t)
		}
	}
	ws.sum.reset()
	for _, b := range h.present {
		ws.sum.addProduct(int(h.counts[b]), h.w[b])
	}
	z := ws.sum.value()
	for _, b := range h.present {
		h.base[b] = h.w[b] / z
	}
	// Descending values give non-increasing probabilities as long as exp is
	// monotonic; sort anyway so that correctness does not rest on it.
	if !slices.IsSortedFunc(h.present, func(a, b uint16) int { return cmpDesc(h.base[a], h.base[b]) }) {
		slices.SortStableFunc(h.present, func(a, b uint16) int { return cmpDesc(h.base[a], h.base[b]) })
	}

	filtered := f.Active(v)
	d.prepare(v, filtered)
	if !filtered {
		for _, b := range h.present {
			h.class[b] = Kept
			if h.base[b] == 0 {
				h.class[b] = Dropped
			}
		}
		top := h.base[h.present[0]]
		for i := 0; i < len(data); i += 2 {
			b := binary.LittleEndian.Uint16(data[i:])
			d.Base[i/2] = h.base[b]
			d.Class[i/2] = h.class[b]
		}
		d.Argmax = h.first(data, func(b uint16) bool { return h.base[b] == top })
		d.ByPattern = true
		return
	}

	g := &ws.g
	g.reset()
	for _, b := range h.present {
		g.push(h.base[b], int(h.counts[b]))
		h.group[b] = int32(len(g.p) - 1)
	}
	g.decide(f, v, &ws.sum)

	// Renormalise over the kept tokens; the split group (if any) is counted
	// token by token in index order.
	ws.sum.reset()
	for _, b := range h.present {
		if gi := h.group[b]; g.keep[gi] && int(gi) != g.split {
			ws.sum.addProduct(int(h.counts[b]), h.w[b])
		}
	}
	if g.split >= 0 && g.keep[g.split] {
		seen := 0
		for i := 0; i < len(data) && seen < g.splitAt; i += 2 {
			if b := binary.LittleEndian.Uint16(data[i:]); int(h.group[b]) == g.split {
				ws.sum.add(h.w[b])
				seen++
			}
		}
	}
	zKept := ws.sum.value()
	for _, b := range h.present {
		gi := h.group[b]
		h.class[b] = g.class[gi]
		h.probs[b] = 0
		if g.keep[gi] {
			h.probs[b] = h.w[b] / zKept
		}
	}
	for i := 0; i < len(data); i += 2 {
		b := binary.LittleEndian.Uint16(data[i:])
		d.Probs[i/2] = h.probs[b]
		d.Base[i/2] = h.base[b]
		d.Class[i/2] = h.class[b]
	}
	if g.split >= 0 {
		seen := 0
		for i := 0; i < len(data); i += 2 {
			if b := binary.LittleEndian.Uint16(data[i:]); int(h.group[b]) == g.split {
				if seen >= g.splitAt {
					d.Probs[i/2], d.Class[i/2] = 0, g.restClass()
				}
				seen++
			}
		}
	}
	d.Argmax = h.first(data, func(b uint16) bool { return h.group[b] == 0 })
	d.TopKProb, d.TopPCut, d.MinPThreshold = g.topKProb, g.topPCut, g.minPThreshold
	d.ByPattern = g.split < 0
}

// cmpDesc orders greater probabilities first.
func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// first returns the index of the first element of data whose pattern is in
// the most probable group (top tells a pattern of it), or -1. The group is
// nearly always one pattern, which a plain comparison finds.
func (h *halfTables) first(data []byte, top func(uint16) bool) int {
	var pats []uint16
	for _, b := range h.present {
		if !top(b) {
			break
		}
		pats = append(pats, b)
	}
	if len(pats) == 1 {
		want := pats[0]
		for i := 0; i+1 < len(data); i += 2 {
			if uint16(data[i])|uint16(data[i+1])<<8 == want {
				return i / 2
			}
		}
		return -1
	}
	for i := 0; i+1 < len(data); i += 2 {
		if top(binary.LittleEndian.Uint16(data[i:])) {
			return i / 2
		}
	}
	return -1
}
