package compare

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// Errors are non-negative float64 values (or NaN, stored with a clear sign
// bit), so their bit patterns, read as unsigned integers, sort the same way
// as the values, with +Inf then NaN last. The histograms below count errors
// by the top 16 bits of those patterns (sign, exponent and 4 bits of
// mantissa): a bucket is a sixteenth of an octave wide.
const (
	histBins  = 1 << 16
	histShift = 48
	// infKey is the bucket of +Inf; buckets above it hold only NaN.
	infKey = 0x7ff0
)

// histLanes is the number of histograms countKeys fills in turn: successive
// errors often fall in the same bucket, and counting them into one histogram
// would make each increment wait for the last.
const histLanes = 4

// countKeys counts the buckets of the error bits, and zeros more errors of
// 0, into the first histogram of absHist and relHist (histLanes histograms of
// histBins each, zero on entry at least up to the tops), leaving the other
// lanes zero. absTop and relTop are the highest buckets any error falls in;
// it returns the lowest nonzero bucket above 0 of each (top+1 when none), so
// that later walks skip the empty buckets below.
func countKeys(absBits, relBits []uint64, absHist, relHist []uint32, absTop, relTop, zeros int) (absLo, relLo int) {
	var lows [2]int
	for c, in := range []struct {
		bits []uint64
		hist []uint32
		top  int
	}{{absBits, absHist, absTop}, {relBits, relHist, relTop}} {
		h := (*[histLanes * histBins]uint32)(in.hist)
		bits := in.bits
		n := len(bits) &^ (histLanes - 1)
		for i := 0; i < n; i += histLanes {
			h[bits[i]>>histShift]++
			h[bits[i+1]>>histShift|1<<16]++
			h[bits[i+2]>>histShift|2<<16]++
			h[bits[i+3]>>histShift|3<<16]++
		}
		for _, b := range bits[n:] {
			h[b>>histShift]++
		}
		lo := in.top + 1
		for k := 0; k <= in.top; k++ {
			c := h[k] + h[k|1<<16] + h[k|2<<16] + h[k|3<<16]
			if c == 0 {
				continue
			}
			h[k] = c
			h[k|1<<16], h[k|2<<16], h[k|3<<16] = 0, 0, 0
			if k > 0 && lo > k {
				lo = k
			}
		}
		h[0] += uint32(zeros)
		lows[c] = lo
	}
	return lows[0], lows[1]
}

// errorKey returns the histogram bucket of an error's bits.
func errorKey(bits uint64) int { return int(bits >> histShift) }

// quantiles are the percentiles ErrorStats reports.
var quantiles = [4]float64{0.5, 0.9, 0.95, 0.99}

// selector computes exact percentiles of one row's errors from their bits and
// histogram: it finds the buckets that hold the wanted ranks, gathers only
// those buckets' elements in one pass, and selects within them. It never
// sorts the row.
type selector struct {
	slot   [histBins]uint8 // bucket -> 1 + index into gather, 0 for none
	keys   []int
	gather [][]uint64
	wanted []rankAt
	// stage and stageSlot hold the gathered errors and their slots before
	// they are split by bucket.
	stage     []uint64
	stageSlot []uint8
	at        []int
	sub       [subBins]uint32
	subSlot   [subBins]uint8
	subs      [][]uint64
	// weighed holds the groups of the wanted buckets (groupPercentiles).
	weighed [][]weighted
}

// A bucket with more elements than subBins is selected from by counting its
// elements by the next subBits bits first, as a second radix pass.
const (
	subBits  = 12
	subBins  = 1 << subBits
	subShift = histShift - subBits
)

// selectRanks moves into a[at[i]] the at[i]-th smallest element of a, for
// ascending ranks at (negative ones are skipped: zeros not gathered). Small
// buckets go through nth, which leaves a partitioned so that each search
// starts past the last; large ones are counted by their next 12 bits first,
// and only the sub-buckets holding the ranks are selected from.
func (s *selector) selectRanks(a []uint64, at []int) {
	if len(a) <= subBins {
		from := 0
		for _, k := range at {
			if k >= 0 {
				nth(a[from:], k-from)
				from = k + 1
			}
		}
		return
	}
	clear(s.sub[:])
	for _, b := range a {
		s.sub[b>>subShift&(subBins-1)]++
	}
	// The sub-bucket of each rank, and its rank within.
	type want struct{ sub, within int }
	var wants [2 * len(quantiles)]want
	cum, sub := 0, 0
	for i, k := range at {
		if k < 0 {
			continue
		}
		for cum+int(s.sub[sub]) <= k {
			cum += int(s.sub[sub])
			sub++
		}
		wants[i] = want{sub, k - cum}
	}
	nsubs := 0
	for i, k := range at {
		if k >= 0 && s.subSlot[wants[i].sub] == 0 {
			nsubs++
			s.subSlot[wants[i].sub] = uint8(nsubs)
		}
	}
	for len(s.subs) < nsubs {
		s.subs = append(s.subs, nil)
	}
	for i := range nsubs {
		s.subs[i] = s.subs[i][:0]
	}
	for _, b := range a {
		if k := s.subSlot[b>>subShift&(subBins-1)]; k != 0 {
			s.subs[k-1] = append(s.subs[k-1], b)
		}
	}
	// Select within each sub-bucket; write the answers where nth would have
	// left them (a[k]), which is all the caller reads.
	var vals [2 * len(quantiles)]uint64
	var from [2*len(quantiles) + 1]int // per sub-bucket slot
	for i, k := range at {
		if k < 0 {
			continue
		}
		slot := s.subSlot[wants[i].sub]
		g := s.subs[slot-1]
		f := from[slot]
		vals[i] = nth(g[f:], wants[i].within-f)
		from[slot] = wants[i].within + 1
	}
	for i, k := range at {
		if k >= 0 {
			s.subSlot[wants[i].sub] = 0
			a[k] = vals[i]
		}
	}
}

// rankAt is one wanted order statistic: its rank, its bucket, its rank
// within the bucket, and (once selected) its bits.
type rankAt struct {
	rank, key, within int
	bits              uint64
}

// percentiles sets st's Median, P90, P95 and P99 of n errors: bits holds
// them but for zeros, and counts is the histogram of all n (nonzero only at
// bucket 0 and within [lo, top]). The percentiles interpolate linearly
// between order statistics, as numpy's default does.
func (s *selector) percentiles(bits []uint64, n int, counts []uint32, lo, top int, st *engine.ErrorStats) {
	if n == 0 {
		return
	}
	s.wantedBuckets(n, counts, lo, top)
	// Gather the elements of those buckets in one pass (the zeros of bucket
	// 0 are only counted: they are most of a renormalised row).
	for len(s.gather) < len(s.keys) {
		s.gather = append(s.gather, nil)
	}
	gathered := 0
	for i, k := range s.keys {
		s.gather[i] = s.gather[i][:0]
		if k != 0 {
			gathered += int(counts[k])
		}
	}
	if gathered < n/16 {
		// Few elements to gather: a branch that is nearly never taken.
		for _, b := range bits {
			if k := s.slot[b>>histShift]; k != 0 && b != 0 {
				s.gather[k-1] = append(s.gather[k-1], b)
			}
		}
	} else {
		// Many: stage every element and keep the wanted ones without a
		// branch, then split them by bucket.
		if len(s.stage) < n {
			s.stage, s.stageSlot = make([]uint64, n), make([]uint8, n)
		}
		stage, stageSlot := s.stage[:n], s.stageSlot[:n]
		m := 0
		for _, b := range bits {
			k := s.slot[b>>histShift]
			stage[m], stageSlot[m] = b, k
			m += int((uint64(k)+255)>>8) & int((b|-b)>>63)
		}
		for i, b := range stage[:m] {
			k := stageSlot[i] - 1
			s.gather[k] = append(s.gather[k], b)
		}
	}
	// Select each rank, bucket by bucket (the wanted ranks are ascending, so
	// those of one bucket are adjacent).
	for i := 0; i < len(s.wanted); {
		key := s.wanted[i].key
		j := i
		for j < len(s.wanted) && s.wanted[j].key == key {
			j++
		}
		g := s.gather[s.slot[key]-1]
		zeros := int(counts[key]) - len(g) // only bucket 0 holds zeros
		s.at = s.at[:0]
		for _, r := range s.wanted[i:j] {
			s.at = append(s.at, r.within-zeros)
		}
		s.selectRanks(g, s.at)
		for k := range s.wanted[i:j] {
			s.wanted[i+k].bits = 0
			if s.at[k] >= 0 {
				s.wanted[i+k].bits = g[s.at[k]]
			}
		}
		i = j
	}
	for _, k := range s.keys {
		s.slot[k] = 0
	}
	s.interpolate(n, st)
}

// wantedBuckets lists the ranks the four percentiles of n errors need,
// ascending (s.wanted), finds each one's bucket in the histogram counts
// (nonzero only at bucket 0 and within [lo, top]) with one walk, and lists
// those buckets (s.keys), each with its slot.
func (s *selector) wantedBuckets(n int, counts []uint32, lo, top int) {
	s.wanted = s.wanted[:0]
	for _, q := range quantiles {
		h := float64(n-1) * q
		r := int(h)
		s.want(r)
		if float64(r) < h && r+1 < n {
			s.want(r + 1)
		}
	}
	cum, w := 0, 0
	for key := 0; key <= top && w < len(s.wanted); key++ {
		if key == 1 {
			key = max(lo, 1)
		}
		c := int(counts[key])
		for w < len(s.wanted) && s.wanted[w].rank < cum+c {
			s.wanted[w].key, s.wanted[w].within = key, s.wanted[w].rank-cum
			w++
		}
		cum += c
	}
	s.keys = s.keys[:0]
	for _, r := range s.wanted {
		if s.slot[r.key] == 0 {
			s.keys = append(s.keys, r.key)
			s.slot[r.key] = uint8(len(s.keys))
		}
	}
}

// interpolate sets st's percentiles of n errors from the values of the
// wanted ranks, linearly between order statistics, as numpy's default
// does.
func (s *selector) interpolate(n int, st *engine.ErrorStats) {
	value := func(rank int) float64 {
		for _, r := range s.wanted {
			if r.rank == rank {
				return math.Float64frombits(r.bits)
			}
		}
		return math.NaN() // not reached: every rank read was wanted
	}
	out := [4]*engine.Float{&st.Median, &st.P90, &st.P95, &st.P99}
	for i, q := range quantiles {
		h := float64(n-1) * q
		lo := int(h)
		v := value(lo)
		if frac := h - float64(lo); frac > 0 && lo+1 < n {
			if hi := value(lo + 1); hi != v {
				v += frac * (hi - v)
			}
		}
		*out[i] = engine.Float(v)
	}
}

// want adds rank to the wanted ranks, keeping them sorted and distinct.
func (s *selector) want(rank int) {
	for i, r := range s.wanted {
		if r.rank == rank {
			return
		}
		if r.rank > rank {
			s.wanted = append(s.wanted, rankAt{})
			copy(s.wanted[i+1:], s.wanted[i:])
			s.wanted[i] = rankAt{rank: rank}
			return
		}
	}
	s.wanted = append(s.wanted, rankAt{rank: rank})
}

// nth returns the k-th smallest element of a (0-based), leaving a
// partitioned around it (a[:k] <= a[k] <= a[k+1:]): quickselect with a
// median-of-three pivot and a three-way partition, so runs of equal errors
// (common: rounded outputs repeat) cost one pass.
func nth(a []uint64, k int) uint64 {
	for len(a) > 1 {
		x, y, z := a[0], a[len(a)/2], a[len(a)-1]
		p := max(min(x, y), min(max(x, y), z))
		lt, i, gt := 0, 0, len(a)
		for i < gt {
			switch {
			case a[i] < p:
				a[lt], a[i] = a[i], a[lt]
				lt++
				i++
			case a[i] > p:
				gt--
				a[i], a[gt] = a[gt], a[i]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			a = a[:lt]
		case k < gt:
			return p
		default:
			k -= gt
			a = a[gt:]
		}
	}
	return a[0]
}

// runHist merges rows' histograms into a run-level one. Run-level
// percentiles are read from it, so they are the upper edge of the bucket that
// holds the rank: an upper bound at most 1/16 (6.25%) above the exact value
// (0 for the bucket of zero, +Inf and NaN for theirs). Its counts are held
// in chunks of histChunk buckets, allocated when a row first reaches them:
// a run's errors span a few hundred buckets of the 65536, and a judgement
// holds four of these per output and worker.
type runHist struct {
	chunks [histBins / histChunk][]uint64
	n      uint64
}

// histChunk is the number of buckets of one chunk of a runHist.
const histChunk = 256

// at returns the count of bucket k, allocating its chunk.
func (h *runHist) at(k int) *uint64 {
	c := &h.chunks[k/histChunk]
	if *c == nil {
		*c = make([]uint64, histChunk)
	}
	return &(*c)[k%histChunk]
}

// add merges a row histogram that is nonzero only at bucket 0 and within
// [lo, top], and clears the row's unless keep is set.
func (h *runHist) add(counts []uint32, lo, top int, keep bool) {
	for k := 0; k <= top; k++ {
		if k == 1 {
			k = max(lo, 1)
			if k > top {
				break
			}
		}
		if c := counts[k]; c != 0 {
			*h.at(k) += uint64(c)
			h.n += uint64(c)
			if !keep {
				counts[k] = 0
			}
		}
	}
}

// merge adds o into h.
func (h *runHist) merge(o *runHist) {
	for i, c := range o.chunks {
		if c == nil {
			continue
		}
		if h.chunks[i] == nil {
			h.chunks[i] = make([]uint64, histChunk)
		}
		for k, v := range c {
			h.chunks[i][k] += v
		}
	}
	h.n += o.n
}

// percentiles sets st's Median, P90, P95 and P99 from the histogram.
func (h *runHist) percentiles(st *engine.ErrorStats) {
	if h.n == 0 {
		return
	}
	out := [4]*engine.Float{&st.Median, &st.P90, &st.P95, &st.P99}
	for i, q := range quantiles {
		rank := uint64(float64(h.n-1) * q)
		var cum uint64
	walk:
		for ci, c := range h.chunks {
			for k, v := range c {
				if cum+v > rank {
					*out[i] = engine.Float(bucketUpper(ci*histChunk + k))
					break walk
				}
				cum += v
			}
		}
	}
}

// bucketUpper returns the least value above bucket k (0 for the bucket of
// zero; +Inf and NaN for theirs).
func bucketUpper(k int) float64 {
	switch {
	case k == 0:
		return 0
	case k == infKey:
		return math.Inf(1)
	case k > infKey:
		return math.NaN()
	}
	return math.Float64frombits(uint64(k+1) << histShift)
}
