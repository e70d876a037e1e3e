package compare

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/ref"
)

// A row of BF16 or F16 logits holds at most 65536 distinct values, and
// about 3000 in practice. The reference gives every token of one logit
// pattern the same probability (ref.Dist.ByPattern), and a kernel computes
// each probability from its own logit and the row's statistics, so a good
// output also gives them one value. Such a row is measured by group, one
// element per distinct logit weighted by its tokens, rather than token by
// token: the same statistics (counts, maxima and their first tokens, exact
// percentiles; sums equal but for their order of addition) at a fraction
// of the cost. This is what lets many outputs of one row share its
// reference cheaply. An output that gives two tokens of one pattern
// different values is measured token by token.

// rowGroups are the tokens of one row of 16-bit logits grouped by pattern,
// in the order of their first tokens.
type rowGroups struct {
	row int // the row grouped, -1 for none
	// logits is the row's data (little-endian 16-bit patterns), v its
	// tokens.
	logits []byte
	v      int
	// of holds each token's group, as little-endian 16-bit indices (so
	// that four are read at once); patterns, first and count each group's
	// pattern, first token and number of tokens, and weight its number of
	// tokens as a float64.
	of       []byte
	patterns []uint16
	first    []int32
	count    []int64
	weight   []float64
	// index maps a pattern present in the row to its group; seen counts a
	// pattern's tokens while the row is grouped (0 for the others).
	index [1 << 16]uint16
	seen  [1 << 16]int32
	// want16 and want32 hold an output's bits by group (readGroups).
	want16 [1 << 16]uint16
	want32 [1 << 16]uint32
}

// group groups row r of 16-bit logits (v tokens).
func (g *rowGroups) group(t *engine.Tensor, r, v int) {
	g.row, g.v = r, v
	g.logits = t.Data[2*r*v : 2*(r+1)*v]
	g.patterns, g.first, g.count, g.weight = g.patterns[:0], g.first[:0], g.count[:0], g.weight[:0]
	if cap(g.of) < 2*v {
		g.of = make([]byte, 2*v)
	}
	g.of = g.of[:2*v]
	data := g.logits
	for i := 0; i < v; i++ {
		p := binary.LittleEndian.Uint16(data[2*i:])
		c := g.seen[p]
		if c == 0 {
			g.index[p] = uint16(len(g.patterns))
			g.patterns = append(g.patterns, p)
			g.first = append(g.first, int32(i))
		}
		g.seen[p] = c + 1
		binary.LittleEndian.PutUint16(g.of[2*i:], g.index[p])
	}
	for _, p := range g.patterns {
		g.count = append(g.count, int64(g.seen[p]))
		g.weight = append(g.weight, float64(g.seen[p]))
		g.seen[p] = 0
	}
}

// groupOf returns the group of token i.
func (g *rowGroups) groupOf(i int) int { return int(binary.LittleEndian.Uint16(g.of[2*i:])) }

// groups returns row r's groups when its logits are 16-bit (nil
// otherwise), grouping the row on first use.
func (w *worker) groups(r int) *rowGroups {
	t := w.j.run.Logits
	if t == nil || t.DType.Size() != 2 {
		return nil
	}
	if w.grouped == nil {
		w.grouped = &rowGroups{row: -1}
	}
	if w.grouped.row != r {
		w.grouped.group(t, r, w.j.vocab)
	}
	return w.grouped
}

// readGroups reads row r of t (a float output) by group into vals, and
// reports whether every token holds its group's value, bit for bit.
func (g *rowGroups) readGroups(t *engine.Tensor, r int, vals []float64) ([]float64, bool) {
	v := g.v
	size := t.DType.Size()
	data := t.Data[size*r*v : size*(r+1)*v]
	vals = resizeFloats(vals, len(g.first))
	var same bool
	switch size {
	case 2:
		for k, f := range g.first {
			g.want16[k] = binary.LittleEndian.Uint16(data[2*f:])
		}
		same = same16(data, g.of, &g.want16)
	case 4:
		for k, f := range g.first {
			g.want32[k] = binary.LittleEndian.Uint32(data[4*f:])
		}
		same = same32(data, g.of, &g.want32)
	}
	if !same {
		return vals, false
	}
	switch t.DType {
	case engine.BF16:
		for k := range vals {
			vals[k] = float64(engine.BF16ToF32(g.want16[k]))
		}
	case engine.F16:
		for k := range vals {
			vals[k] = float64(engine.F16ToF32(g.want16[k]))
		}
	case engine.F32:
		for k := range vals {
			vals[k] = float64(math.Float32frombits(g.want32[k]))
		}
	default:
		for k, f := range g.first {
			vals[k] = t.Float(r*v + int(f))
		}
	}
	return vals, true
}

// sameChunk is the number of bytes of groups same16 and same32 check
// between two looks at what they found: an output that is not uniform is
// told early, and one that is costs no branch per token.
const sameChunk = 8192

// same16 reports whether every 16-bit element of out is what want holds
// for its group (of: the groups as 16-bit indices). It reads eight tokens
// at a time and folds the differences without a branch, looking at them
// once per chunk.
func same16(out, of []byte, want *[1 << 16]uint16) bool {
	n := min(len(out), len(of))
	var bad uint64
	i := 0
	for ; i+16 <= n; i += 16 {
		if i%sameChunk == 0 && bad != 0 {
			return false
		}
		o, p := out[i:i+16], of[i:i+16]
		k0, k1 := binary.LittleEndian.Uint64(p[0:8]), binary.LittleEndian.Uint64(p[8:16])
		e0 := uint64(want[uint16(k0)]) | uint64(want[uint16(k0>>16)])<<16 | uint64(want[uint16(k0>>32)])<<32 | uint64(want[uint16(k0>>48)])<<48
		e1 := uint64(want[uint16(k1)]) | uint64(want[uint16(k1>>16)])<<16 | uint64(want[uint16(k1>>32)])<<32 | uint64(want[uint16(k1>>48)])<<48
		bad |= (binary.LittleEndian.Uint64(o[0:8]) ^ e0) | (binary.LittleEndian.Uint64(o[8:16]) ^ e1)
	}
	for ; i+2 <= n; i += 2 {
		bad |= uint64(binary.LittleEndian.Uint16(out[i:]) ^ want[binary.LittleEndian.Uint16(of[i:])])
	}
	return bad == 0
}

// same32 is same16 for 32-bit elements (four tokens at a time).
func same32(out, of []byte, want *[1 << 16]uint32) bool {
	n := min(len(out)/2, len(of))
	var bad uint64
	i := 0
	for ; i+8 <= n; i += 8 {
		if i%sameChunk == 0 && bad != 0 {
			return false
		}
		o, p := out[2*i:2*i+16], of[i:i+8]
		k := binary.LittleEndian.Uint64(p)
		e0 := uint64(want[uint16(k)]) | uint64(want[uint16(k>>16)])<<32
		e1 := uint64(want[uint16(k>>32)]) | uint64(want[uint16(k>>48)])<<32
		bad |= (binary.LittleEndian.Uint64(o[0:8]) ^ e0) | (binary.LittleEndian.Uint64(o[8:16]) ^ e1)
	}
	for ; i+2 <= n; i += 2 {
		bad |= uint64(binary.LittleEndian.Uint32(out[2*i:]) ^ want[binary.LittleEndian.Uint16(of[i:])])
	}
	return bad == 0
}

// scanGroups is scanOutput for a row read by groups.
func (g *rowGroups) scanGroups(vals []float64) outputScan {
	s := outputScan{argmax: -1, firstNaN: -1, firstInf: -1}
	top := math.Inf(-1)
	for k, o := range vals {
		n := g.count[k]
		s.rowSum += float64(n) * o
		if o > top {
			top, s.argmax = o, int(g.first[k])
		}
		switch {
		case o != o:
			if s.nan == 0 {
				s.firstNaN = int(g.first[k])
			}
			s.nan += int(n)
		case math.IsInf(o, 0):
			if s.inf == 0 {
				s.firstInf = int(g.first[k])
			}
			s.inf += int(n)
		}
	}
	if s.argmax < 0 && s.nan < g.v {
		s.argmax = int(g.first[slices.Index(vals, top)])
	}
	return s
}

// groupRef is one reference distribution of a row by group: each group's
// probability, base and class (those of its first token).
type groupRef struct {
	row     int // the row gathered, -1 for none
	r, base []float64
	cls     []ref.Class
}

// gather fills b with the reference d of g's row by group, unless it holds
// it already.
func (g *rowGroups) gather(d *ref.Dist, b *groupRef) {
	if b.row == g.row {
		return
	}
	n := len(g.first)
	b.row = g.row
	b.r, b.base, b.cls = resizeFloats(b.r, n), resizeFloats(b.base, n), slices.Grow(b.cls[:0], n)[:n]
	for k, f := range g.first {
		b.r[k], b.base[k], b.cls[k] = d.Probs[f], d.Base[f], d.Class[f]
	}
}

// measureGroups is measure for a row read by groups: out, r, base and cls
// hold each group's output and reference, top is the group of the
// reference's argmax. It fills m as measure would for the row's tokens;
// its row histograms count tokens, and its bits are one per group
// (groupPercentiles reads them with the groups' counts).
func measureGroups(m *measurement, g *rowGroups, out []float64, os *outputScan, r, base []float64, cls []ref.Class, top int, tol engine.Tolerance, underflow float64, b *rowBuffers) {
	*m = measurement{worst: -1, firstNaN: os.firstNaN, firstInf: os.firstInf, rowSum: os.rowSum}
	n := len(out)
	full := g.v
	m.measured = n
	atol, rtol := tol.Atol, tol.Rtol
	absBits, relBits := b.absBits[:n], b.relBits[:n]
	logged, nLogged := b.logged[:n], 0
	var sumAbs, sumRel, kl, minAtol, minRtol float64
	maxAbs, maxRel := -1.0, -1.0
	maxAbsAt, maxRelAt := 0, 0
	mismatched := 0
	extra := false
	for k, o := range out {
		c := float64(g.count[k])
		ri := r[k]
		d := o - ri
		ad := math.Abs(d)
		s := d / (ri + 0x1p-1022)
		rel := math.Abs(s)
		s2 := s * s
		switch {
		case rel < 1e-4:
			kl += c * ri * s2 * (1.0/2 - s*(1.0/3))
		case rel < 0.05:
			kl += c * ri * s2 * ((1.0/2 - s*(1.0/3)) + s2*((1.0/4-s*(1.0/5))+s2*(1.0/6)))
		default: // and NaN
			logged[nLogged] = int32(k)
			nLogged++
		}
		if (o == 0) != (ri == 0) {
			m.supportDiff(int(g.first[k]), int(g.count[k]), o, ri, base[k], cls[k], underflow)
		}
		rr := rtol * ri
		if !(ad <= atol+rr) {
			mismatched += int(g.count[k])
			if ad > m.worstAbs || m.worst < 0 {
				m.worstAbs, m.worst, m.worstRef = ad, int(g.first[k]), ri
			}
		}
		if ex := ad - rr; ex > minAtol {
			minAtol = ex
		}
		if ad > atol {
			minRtol = max(minRtol, (ad-atol)/ri)
		}
		sumAbs += c * ad
		sumRel += c * rel
		if ad > maxAbs {
			maxAbs, maxAbsAt = ad, int(g.first[k])
		}
		if ri == 0 && o == o && o != 0 { // an extra token
			rel, extra = math.Inf(1), true
		}
		if rel > maxRel {
			maxRel, maxRelAt = rel, int(g.first[k])
		}
		absBits[k], relBits[k] = math.Float64bits(ad), math.Float64bits(rel)&^signBit
	}
	kl += klLogged(out, r, logged[:nLogged], g.count, underflow)
	if extra {
		sumRel = math.Inf(1)
	}
	t := rowTotals{
		elements: full, mismatched: mismatched, sumAbs: sumAbs, sumRel: sumRel, kl: kl, minAtol: minAtol, minRtol: minRtol,
		maxAbs: maxAbs, maxRel: maxRel, maxAbsAt: maxAbsAt, maxRelAt: maxRelAt,
		argmaxAgree: os.argmax >= 0 && r[g.groupOf(os.argmax)] == r[top],
	}
	m.setTops(&t, os)
	m.loAbs, m.loRel = countGroupKeys(absBits, relBits, g.count, b.absHist, b.relHist, m.topAbs, m.topRel)
	m.setDrift(&t, os, tol)
}

// countGroupKeys is countKeys for errors held by groups: each group's
// bucket counts its tokens. It returns the lowest nonzero bucket above 0 of
// each histogram (top+1 when none).
func countGroupKeys(absBits, relBits []uint64, n []int64, absHist, relHist []uint32, absTop, relTop int) (absLo, relLo int) {
	absLo, relLo = absTop+1, relTop+1
	for k, c := range n {
		a, r := errorKey(absBits[k]), errorKey(relBits[k])
		absHist[a] += uint32(c)
		relHist[r] += uint32(c)
		if a > 0 && a < absLo {
			absLo = a
		}
		if r > 0 && r < relLo {
			relLo = r
		}
	}
	return absLo, relLo
}

// groupPercentiles is selector.percentiles for errors held by groups: bits
// holds one error per group, n each group's tokens, counts the histogram of
// all tokens. It finds the bucket of each wanted rank in the histogram,
// then orders only the groups of those buckets.
func (s *selector) groupPercentiles(bits []uint64, n []int64, total int, counts []uint32, lo, top int, st *engine.ErrorStats) {
	if total == 0 {
		return
	}
	s.wantedBuckets(total, counts, lo, top)
	// Gather the groups of the wanted buckets in one pass, then order
	// each bucket's few groups and walk their tokens to the ranks.
	for len(s.weighed) < len(s.keys) {
		s.weighed = append(s.weighed, nil)
	}
	for i := range s.keys {
		s.weighed[i] = s.weighed[i][:0]
	}
	for k, b := range bits {
		if slot := s.slot[errorKey(b)]; slot != 0 {
			s.weighed[slot-1] = append(s.weighed[slot-1], weighted{b, n[k]})
		}
	}
	for i := 0; i < len(s.wanted); {
		key := s.wanted[i].key
		in := s.weighed[s.slot[key]-1]
		slices.SortFunc(in, func(a, b weighted) int {
			switch {
			case a.bits < b.bits:
				return -1
			case a.bits > b.bits:
				return 1
			}
			return 0
		})
		for ; i < len(s.wanted) && s.wanted[i].key == key; i++ {
			var c int64
			for _, e := range in {
				if c += e.n; int64(s.wanted[i].within) < c {
					s.wanted[i].bits = e.bits
					break
				}
			}
		}
	}
	for _, k := range s.keys {
		s.slot[k] = 0
	}
	s.interpolate(total, st)
}

// compareGroups is compareRow for a row read by groups: it measures the
// row against d by group, renormalising the reference over the output's
// support when they differ only at boundary tokens, and returns the
// reference it compared with, by group. gr caches d by group for the
// other outputs of the row.
func compareGroups(m *measurement, g *rowGroups, out []float64, os *outputScan, d *ref.Dist, tol engine.Tolerance, underflow float64, b *rowBuffers, gr *groupRef) []float64 {
	g.gather(d, gr)
	r, base, cls := gr.r, gr.base, gr.cls
	top := g.groupOf(d.Argmax)
	measureGroups(m, g, out, os, r, base, cls, top, tol, underflow, b)
	if m.supportOK() && (m.boundaryKept.n > 0 || m.boundaryDropped.n > 0) {
		kept, dropped := m.boundaryKept, m.boundaryDropped
		m.clearHists(b)
		b.renorm = renormalisedRef(b.renorm[:cap(b.renorm)], out, base, cls, g.count)
		r = b.renorm[:len(out)]
		measureGroups(m, g, out, os, r, base, cls, top, tol, underflow, b)
		m.boundaryKept, m.boundaryDropped = kept, dropped
		m.renormalised = true
	}
	b.sel.groupPercentiles(b.absBits[:m.measured], g.count, g.v, b.absHist, m.loAbs, m.topAbs, &m.drift.Abs)
	b.sel.groupPercentiles(b.relBits[:m.measured], g.count, g.v, b.relHist, m.loRel, m.topRel, &m.drift.Rel)
	return r
}

// weighted is an error held by a group of n tokens.
type weighted struct {
	bits uint64
	n    int64
}
