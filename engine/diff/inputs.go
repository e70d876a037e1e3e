package diff

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"github.com/sampviz/sampviz/engine"
)

// compareInputs says whether runs a and b (of one op) read the same inputs:
// every input tensor of the op with the same shape and values (dtypes may
// differ), every per-row parameter the op takes the same on every row, and
// the same run-wide settings and padded lanes. Otherwise it names the first
// that differs and the first row where it does.
func compareInputs(a, b *engine.Run) Inputs {
	spec := a.Op.Spec()
	for _, ts := range spec.Inputs {
		ta, tb := a.Input(ts.Name), b.Input(ts.Name)
		switch {
		case ta == nil && tb == nil:
		case ta == nil || tb == nil:
			where := "A"
			if tb != nil {
				where = "B"
			}
			return Inputs{Tensor: ts.Name, Row: -1, Why: fmt.Sprintf("only %s has %s", where, ts.Name)}
		case !slices.Equal(ta.Shape, tb.Shape):
			return Inputs{Tensor: ts.Name, Row: -1, Why: fmt.Sprintf("%s has shape %s in A and %s in B", ts.Name, ta.ShapeString(), tb.ShapeString())}
		default:
			if r := firstRowApart(ta, tb); r >= 0 {
				return Inputs{Tensor: ts.Name, Row: r, Why: fmt.Sprintf("%s differs, first on row %d", ts.Name, r)}
			}
		}
	}
	pa, pb := &a.Params, &b.Params
	perRow := []struct {
		name string
		a, b func(r int) string
	}{
		{"temperature", floatAt(pa.Temperature), floatAt(pb.Temperature)},
		{"top_k", intAt(pa.TopK), intAt(pb.TopK)},
		{"top_p", floatAt(pa.TopP), floatAt(pb.TopP)},
		{"min_p", floatAt(pa.MinP), floatAt(pb.MinP)},
		{"seed", uintAt(pa.Seed), uintAt(pb.Seed)},
		{"offset", uintAt(pa.Offset), uintAt(pb.Offset)},
	}
	for _, p := range perRow {
		if !spec.Takes(p.name) {
			continue
		}
		for r := range a.Rows() {
			if va, vb := p.a(r), p.b(r); va != vb {
				return Inputs{Tensor: p.name, Row: r, Why: fmt.Sprintf("%s differs, first on row %d (%s in A, %s in B)", p.name, r, va, vb)}
			}
		}
	}
	runWide := []struct {
		name string
		a, b string
	}{
		{"filter_order", string(pa.FilterOrder), string(pb.FilterOrder)},
		{"top_k_ties", string(pa.TopKTies), string(pb.TopKTies)},
		{"max_ngram_size", strconv.Itoa(pa.MaxNgramSize), strconv.Itoa(pb.MaxNgramSize)},
		{"max_draft_tokens", strconv.Itoa(pa.MaxDraftTokens), strconv.Itoa(pb.MaxDraftTokens)},
		{"threshold", strconv.Itoa(pa.Threshold), strconv.Itoa(pb.Threshold)},
	}
	for _, p := range runWide {
		if spec.Takes(p.name) && p.a != p.b {
			return Inputs{Tensor: p.name, Row: -1, Why: fmt.Sprintf("%s is %s in A and %s in B", p.name, p.a, p.b)}
		}
	}
	for r := range a.Rows() {
		if a.Padding(r) != b.Padding(r) {
			return Inputs{Tensor: "valid", Row: r, Why: fmt.Sprintf("the padded lanes differ, first on row %d", r)}
		}
	}
	return Inputs{Same: true, Row: -1}
}

// firstRowApart returns the first row (along the first dimension) where two
// tensors of one shape hold different values (NaN equals NaN, -0 equals
// 0), or -1. Rows whose bytes are equal are skipped without decoding.
func firstRowApart(a, b *engine.Tensor) int {
	rows := max(a.Dim(0), 1)
	per := a.NumElements() / rows
	float := a.DType.IsFloat() || b.DType.IsFloat()
	for r := range rows {
		if a.DType == b.DType {
			size := per * a.DType.Size()
			if bytes.Equal(a.Data[r*size:(r+1)*size], b.Data[r*size:(r+1)*size]) {
				continue
			}
		}
		for i := r * per; i < (r+1)*per; i++ {
			if float {
				if x, y := a.Float(i), b.Float(i); x != y && (x == x || y == y) {
					return r
				}
			} else if a.Int(i) != b.Int(i) {
				return r
			}
		}
	}
	return -1
}

func floatAt(v []float64) func(int) string {
	return func(r int) string { return engine.FormatFloat(v[r]) }
}

func intAt(v []int) func(int) string {
	return func(r int) string { return strconv.Itoa(v[r]) }
}

func uintAt(v []uint64) func(int) string {
	return func(r int) string { return strconv.FormatUint(v[r], 10) }
}
