package engine

import "fmt"

// ParamGroup names the per-row parameters an op's kernels read.
type ParamGroup uint8

// The parameter groups.
const (
	// NeedTemperature: the temperature.
	NeedTemperature ParamGroup = 1 << iota
	// NeedFilters: top_k, top_p and min_p, with the filter order and tie rule.
	NeedFilters
	// NeedSeeds: seed and offset.
	NeedSeeds
)

// Bytes returns what a kernel reads of the groups in g for one row:
// temperature, top_k, top_p and min_p as 4-byte values, seed and offset as
// 8-byte ones. Backends count it into Timing.Bytes.
func (g ParamGroup) Bytes() int64 {
	var n int64
	if g&NeedTemperature != 0 {
		n += 4
	}
	if g&NeedFilters != 0 {
		n += 3 * 4
	}
	if g&NeedSeeds != 0 {
		n += 2 * 8
	}
	return n
}

// KernelParams are a run's per-row parameters as kernels take them: float32
// temperature, top_p and min_p, integer top_k, 64-bit seed and offset, and
// the filter order and tie rule with their defaults filled in. Every slice
// has one entry per row; a group an op does not read holds its "off" values
// (temperature 1, no filter, seed and offset 0).
type KernelParams struct {
	Temperature  []float32
	TopK         []int
	TopP, MinP   []float32
	Seed, Offset []uint64
	Order        FilterOrder
	Ties         TopKTies
	// TemperatureOrder is TemperatureLast only where some row needs it.
	TemperatureOrder TemperatureOrder
}

// ForOp checks and converts the parameters op's kernels read
// (OpSpec.Kernel) for a batch of rows: ForKernels with the op table's
// groups.
func (p *Params) ForOp(op Op, rows int) (*KernelParams, error) {
	s := op.Spec()
	if s == nil {
		return nil, fmt.Errorf("op %q: %w", op, ErrUnsupported)
	}
	return p.ForKernels(rows, s.Kernel)
}

// ForKernels checks the groups in need for a batch of rows and converts
// them. Both backends call it, so both refuse the same parameters, in the
// parameter table's words (Param.CheckFloat, CheckInt, CheckChoice): a
// slice whose length is not rows, or a value out of its range; an unknown
// filter order or tie rule wraps ErrUnsupported.
func (p *Params) ForKernels(rows int, need ParamGroup) (*KernelParams, error) {
	k := &KernelParams{
		Temperature: make([]float32, rows),
		TopK:        make([]int, rows),
		TopP:        make([]float32, rows),
		MinP:        make([]float32, rows),
		Seed:        make([]uint64, rows),
		Offset:      make([]uint64, rows),
		Order:       TopKFirst,
		Ties:        TiesKeep,

		TemperatureOrder: TemperatureFirst,
	}
	for r := range rows {
		k.Temperature[r], k.TopP[r] = 1, 1
	}
	count := func(name string, n int) error {
		if n != rows {
			return fmt.Errorf("%s: %d values for %d rows", name, n, rows)
		}
		return nil
	}
	rowFloat := func(name string, vals []float64, dst []float32) error {
		if err := count(name, len(vals)); err != nil {
			return err
		}
		p := ParamByName(name)
		for r, v := range vals {
			if err := p.CheckFloat(v); err != nil {
				return fmt.Errorf("row %d: %w", r, err)
			}
			dst[r] = float32(v)
		}
		return nil
	}
	if need&NeedTemperature != 0 {
		if err := rowFloat("temperature", p.Temperature, k.Temperature); err != nil {
			return nil, err
		}
	}
	if need&NeedFilters != 0 {
		if err := rowFloat("top_p", p.TopP, k.TopP); err != nil {
			return nil, err
		}
		if err := rowFloat("min_p", p.MinP, k.MinP); err != nil {
			return nil, err
		}
		if err := count("top_k", len(p.TopK)); err != nil {
			return nil, err
		}
		topK := ParamByName("top_k")
		for r, v := range p.TopK {
			if err := topK.CheckInt(int64(v)); err != nil {
				return nil, fmt.Errorf("row %d: %w", r, err)
			}
			k.TopK[r] = v
		}
		if p.FilterOrder != "" {
			if err := ParamByName("filter_order").CheckChoice(string(p.FilterOrder)); err != nil {
				return nil, fmt.Errorf("%w: %w", err, ErrUnsupported)
			}
			k.Order = p.FilterOrder
		}
		if p.TopKTies != "" {
			if err := ParamByName("top_k_ties").CheckChoice(string(p.TopKTies)); err != nil {
				return nil, fmt.Errorf("%w: %w", err, ErrUnsupported)
			}
			k.Ties = p.TopKTies
		}
		if p.TemperatureOrder != "" {
			if err := ParamByName("temperature_order").CheckChoice(string(p.TemperatureOrder)); err != nil {
				return nil, fmt.Errorf("%w: %w", err, ErrUnsupported)
			}
			k.TemperatureOrder = p.TemperatureOrder
		}
		k.simplifyChain()
	}
	if need&NeedSeeds != 0 {
		if err := count("seed", len(p.Seed)); err != nil {
			return nil, err
		}
		if err := count("offset", len(p.Offset)); err != nil {
			return nil, err
		}
		copy(k.Seed, p.Seed)
		copy(k.Offset, p.Offset)
	}
	return k, nil
}

// simplifyChain states the chain as the kernels need it (docs/SEMANTICS.md
// "Kernel semantics"): ties any is lowest_index (one of the choices it
// allows); min_p_first is top_k_first unless some row has both top-p and
// min-p on, and temperature last is first unless some sampled row has a
// temperature other than 1 with top-p or min-p on, since only then do they
// keep other tokens. So a chain the data cannot tell apart from one the
// kernels serve runs on them.
func (k *KernelParams) simplifyChain() {
	if k.Ties == TiesAny {
		k.Ties = TiesLowestIndex
	}
	minPFirst, last := false, false
	for r, t := range k.Temperature {
		if !(t > 0) {
			continue
		}
		minPFirst = minPFirst || k.TopP[r] < 1 && k.MinP[r] > 0
		last = last || t != 1 && (k.TopP[r] < 1 || k.MinP[r] > 0)
	}
	if k.Order == MinPFirst && !minPFirst {
		k.Order = TopKFirst
	}
	if k.TemperatureOrder == TemperatureLast && !last {
		k.TemperatureOrder = TemperatureFirst
	}
}

// Filtered reports whether row r of a vocabulary of v tokens has a filter on
// (docs/SEMANTICS.md: top_k in (0, V), top_p < 1, min_p > 0).
func (k *KernelParams) Filtered(r, v int) bool {
	return (k.TopK[r] > 0 && k.TopK[r] < v) || k.TopP[r] < 1 || k.MinP[r] > 0
}

// CheckTensor reports whether t is present, has rank dimensions, a float (or
// integer) dtype and as many bytes as its shape says; its errors wrap
// ErrUnsupported, since a backend cannot run what fails it.
func CheckTensor(t *Tensor, name string, rank int, float bool) error {
	if t == nil {
		return fmt.Errorf("%s: missing: %w", name, ErrUnsupported)
	}
	if len(t.Shape) != rank {
		return fmt.Errorf("%s: shape %s, want %d dimensions: %w", name, t.ShapeString(), rank, ErrUnsupported)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("%s: negative dimension in shape %s: %w", name, t.ShapeString(), ErrUnsupported)
		}
	}
	if float && !t.DType.IsFloat() || !float && !t.DType.IsInt() {
		kind := "an integer"
		if float {
			kind = "a float"
		}
		return fmt.Errorf("%s: dtype %s, want %s dtype: %w", name, t.DType, kind, ErrUnsupported)
	}
	if want := t.NumElements() * t.DType.Size(); len(t.Data) != want {
		return fmt.Errorf("%s: %d bytes for shape %s of %s, want %d: %w", name, len(t.Data), t.ShapeString(), t.DType, want, ErrUnsupported)
	}
	return nil
}

// TensorBytes returns the bytes of the tensors that are not nil.
func TensorBytes(ts ...*Tensor) int64 {
	var n int64
	for _, t := range ts {
		if t != nil {
			n += int64(len(t.Data))
		}
	}
	return n
}
