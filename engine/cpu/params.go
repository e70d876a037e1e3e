package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sampviz/sampviz/engine"
)

// rowParams are a run's per-row parameters as the kernels receive them:
// float32 temperature, top_p and min_p, integer top_k.
type rowParams struct {
	temperature []float32
	topK        []int
	topP, minP  []float32
	seed        []uint64
	offset      []uint64
	order       engine.FilterOrder
	ties        engine.TopKTies
}

// The parameter groups an op needs.
const (
	needTemperature = 1 << iota
	needFilters
	needSeeds
)

// resolveParams checks the parameter groups in need for rows rows and
// converts them to the kernels' types. Out-of-range values are errors: a
// temperature that is not finite and >= 0 in float32, top_k < 0, top_p
// outside (0, 1], min_p outside [0, 1], an unknown filter order or tie rule.
func resolveParams(p *engine.Params, rows, need int) (*rowParams, error) {
	rp := &rowParams{order: p.FilterOrder, ties: p.TopKTies}
	count := func(name string, n int) error {
		if n != rows {
			return fmt.Errorf("%s: %d values for %d rows", name, n, rows)
		}
		return nil
	}
	if need&needTemperature != 0 {
		if err := count("temperature", len(p.Temperature)); err != nil {
			return nil, err
		}
		rp.temperature = make([]float32, rows)
		for r, v := range p.Temperature {
			t := float32(v)
			if !(t >= 0 && t <= math.MaxFloat32) {
				return nil, fmt.Errorf("row %d: temperature %g is not a finite number >= 0", r, v)
			}
			rp.temperature[r] = t
		}
	}
	if need&needFilters != 0 {
		for _, c := range []struct {
			name string
			n    int
		}{{"top_k", len(p.TopK)}, {"top_p", len(p.TopP)}, {"min_p", len(p.MinP)}} {
			if err := count(c.name, c.n); err != nil {
				return nil, err
			}
		}
		rp.topK = make([]int, rows)
		rp.topP = make([]float32, rows)
		rp.minP = make([]float32, rows)
		for r := range rows {
			if p.TopK[r] < 0 {
				return nil, fmt.Errorf("row %d: top_k %d is negative", r, p.TopK[r])
			}
			rp.topK[r] = p.TopK[r]
			tp, mp := float32(p.TopP[r]), float32(p.MinP[r])
			if !(tp > 0 && tp <= 1) {
				return nil, fmt.Errorf("row %d: top_p %g outside (0, 1]", r, p.TopP[r])
			}
			if !(mp >= 0 && mp <= 1) {
				return nil, fmt.Errorf("row %d: min_p %g outside [0, 1]", r, p.MinP[r])
			}
			rp.topP[r], rp.minP[r] = tp, mp
		}
		switch rp.order {
		case "":
			rp.order = engine.TopKFirst
		case engine.TopKFirst, engine.Joint:
		default:
			return nil, fmt.Errorf("filter order %q (want top_k_first or joint): %w", rp.order, engine.ErrUnsupported)
		}
		switch rp.ties {
		case "":
			rp.ties = engine.TiesKeep
		case engine.TiesKeep, engine.TiesLowestIndex:
		default:
			return nil, fmt.Errorf("top_k ties %q (want keep or lowest_index): %w", rp.ties, engine.ErrUnsupported)
		}
	}
	if need&needSeeds != 0 {
		if err := count("seed", len(p.Seed)); err != nil {
			return nil, err
		}
		if err := count("offset", len(p.Offset)); err != nil {
			return nil, err
		}
		rp.seed, rp.offset = p.Seed, p.Offset
	}
	return rp, nil
}

// filtered reports whether row r of a vocabulary of v tokens has a filter
// that Filter applies.
func (rp *rowParams) filtered(r, v int) bool {
	return (rp.topK[r] > 0 && rp.topK[r] < v) || rp.topP[r] < 1 || rp.minP[r] > 0
}

// filter marks in keep the survivors of row r's filters on weights w.
func (rp *rowParams) filter(f *filter, r int, w []float32, keep []bool) {
	f.apply(w, rp.topK[r], rp.topP[r], rp.minP[r], rp.order, rp.ties, keep)
}

// checkTensor reports whether t is present, has rank dimensions, a float
// (or integer) dtype, and as many bytes as its shape says.
func checkTensor(t *engine.Tensor, name string, rank int, float bool) error {
	if t == nil {
		return fmt.Errorf("%s: missing: %w", name, engine.ErrUnsupported)
	}
	if len(t.Shape) != rank {
		return fmt.Errorf("%s: shape %s, want %d dimensions: %w", name, t.ShapeString(), rank, engine.ErrUnsupported)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("%s: negative dimension in shape %s: %w", name, t.ShapeString(), engine.ErrUnsupported)
		}
	}
	if float && !t.DType.IsFloat() || !float && !t.DType.IsInt() {
		kind := "an integer"
		if float {
			kind = "a float"
		}
		return fmt.Errorf("%s: dtype %s, want %s dtype: %w", name, t.DType, kind, engine.ErrUnsupported)
	}
	if want := t.NumElements() * t.DType.Size(); len(t.Data) != want {
		return fmt.Errorf("%s: %d bytes for shape %s of %s, want %d: %w", name, len(t.Data), t.ShapeString(), t.DType, want, engine.ErrUnsupported)
	}
	return nil
}

// putFloats writes v as F32 into t starting at element start.
func putFloats(t *engine.Tensor, start int, v []float32) {
	b := t.Data[4*start : 4*(start+len(v))]
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// putInt32 writes v as element i of the I32 tensor t.
func putInt32(t *engine.Tensor, i int, v int32) {
	binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(v))
}
