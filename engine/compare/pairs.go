package compare

import (
	"math"

	"github.com/sampviz/sampviz/engine"
)

// pair is two float outputs of one kind (probabilities, or logits of a
// logits_gate run) compared with each other elementwise, row by row, while
// both rows are decoded: the drift between them is what the mode table's
// columns against other outputs and the agreement's drift report.
type pair struct {
	a, b int // plan indices, a < b
	// rows holds each row's comparison, written by the worker that judges
	// the row.
	rows []pairRow
}

// pairRow is one row of a pair: ok once both rows were decoded; max, at the
// token at, is the greatest |a - b|; sum is Σ|a - b| over n elements
// compared; nan counts the elements where one side is NaN.
type pairRow struct {
	ok       bool
	max, sum float64
	at, n    int
	nan      int
}

// newPairs lists every pair of the judgeable float outputs of one kind.
func newPairs(plans []*plan, rows int) []*pair {
	var pairs []*pair
	for a, pa := range plans {
		for b := a + 1; b < len(plans); b++ {
			pb := plans[b]
			// Logprobs pair when both hold every token's (a top-N's tokens
			// differ from one output to the other).
			full := pa.logprobs && pb.logprobs && pa.topN == 0 && pb.topN == 0
			if pa.problem == "" && pb.problem == "" && pa.rep.Kind == pb.rep.Kind && (pa.probs || pa.logits || full) {
				pairs = append(pairs, &pair{a: a, b: b, rows: make([]pairRow, rows)})
			}
		}
	}
	return pairs
}

// comparePairs compares, for row r, every pair whose two rows were read:
// by group when both were, else token by token (a row read by group is
// decoded for it). Equal values (infinities included) differ by 0.
func (w *worker) comparePairs(r int) {
	for _, pr := range w.j.pairs {
		a, b := w.read[pr.a], w.read[pr.b]
		switch {
		case a == readNone || b == readNone:
		case a == readGroups && b == readGroups:
			pr.rows[r] = diffGroups(w.groupVals[pr.a], w.groupVals[pr.b], w.grouped)
		default:
			pr.rows[r] = diffRows(w.tokens(pr.a, r), w.tokens(pr.b, r))
		}
	}
}

// tokens returns plan i's row r token by token, decoding it when it was
// read by group.
func (w *worker) tokens(i, r int) []float64 {
	if w.read[i] == readGroups {
		v := w.j.vocab
		decodeRow(w.j.plans[i].out.Probs, r*v, w.row(i))
		w.read[i] = readTokens
	}
	return w.row(i)
}

// diffRows compares two rows elementwise.
func diffRows(a, b []float64) pairRow {
	pr := pairRow{ok: true}
	for k, x := range a[:len(b)] {
		d := math.Abs(x - b[k])
		switch {
		case x == b[k]:
			d = 0
		case d != d:
			pr.nan++
			continue
		case d > pr.max:
			pr.max, pr.at = d, k
		}
		pr.sum += d
		pr.n++
	}
	return pr
}

// diffGroups is diffRows for two rows read by the groups g.
func diffGroups(a, b []float64, g *rowGroups) pairRow {
	pr := pairRow{ok: true}
	at := -1
	w := g.weight[:len(a)]
	b = b[:len(a)]
	var sum float64
	for k, x := range a {
		d := math.Abs(x - b[k])
		if d != d { // NaN: one side is NaN, or both are the same infinity
			if x == b[k] {
				continue
			}
			pr.nan += int(g.count[k])
			continue
		}
		sum += w[k] * d
		if d > pr.max {
			pr.max, at = d, k
		}
	}
	pr.sum = sum
	pr.n = g.v - pr.nan
	if at >= 0 {
		pr.at = int(g.first[at])
	}
	return pr
}

// pairTotal is a pair over every row: the greatest difference, its row and
// token, the mean, and the rows compared and identical.
type pairTotal struct {
	max             float64
	row, token      int
	mean            float64
	compared, equal int
	elements        int
}

// total sums up the pair's rows.
func (pr *pair) total() pairTotal {
	t := pairTotal{row: -1, token: -1}
	var sum float64
	for r, row := range pr.rows {
		if !row.ok {
			continue
		}
		t.compared++
		if row.max == 0 && row.nan == 0 {
			t.equal++
		}
		if t.row < 0 || row.max > t.max {
			t.max, t.row, t.token = row.max, r, row.at
		}
		sum += row.sum
		t.elements += row.n
	}
	if t.elements > 0 {
		t.mean = sum / float64(t.elements)
	}
	return t
}

// floatPtr returns v as a pointer to an engine.Float, for the report's
// optional numbers.
func floatPtr(v float64) *engine.Float {
	f := engine.Float(v)
	return &f
}
