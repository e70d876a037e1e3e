package engine

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Tensor is a named, row-major, contiguous array whose elements stay in their
// stored dtype and little-endian byte order. Data may alias a memory-mapped
// file: code that receives a Tensor reads it and never writes to it.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// NumElements returns the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Dim returns the size of dimension i, or 0 when the tensor has fewer dims.
func (t *Tensor) Dim(i int) int {
	if i < 0 || i >= len(t.Shape) {
		return 0
	}
	return t.Shape[i]
}

// ShapeString formats the shape as "[512, 128256]".
func (t *Tensor) ShapeString() string { return FormatShape(t.Shape) }

// FormatShape formats a shape as "[512, 128256]".
func FormatShape(shape []int) string {
	s := "["
	for i, d := range shape {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(d)
	}
	return s + "]"
}

// Float returns element i as float64: exact for every float dtype, converted
// for integers.
func (t *Tensor) Float(i int) float64 {
	switch t.DType {
	case BF16:
		return float64(BF16ToF32(binary.LittleEndian.Uint16(t.Data[2*i:])))
	case F16:
		return float64(F16ToF32(binary.LittleEndian.Uint16(t.Data[2*i:])))
	case F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:])))
	case F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
	}
	return float64(t.Int(i))
}

// Float32 returns element i as float32, as a kernel loading it would: exact for
// BF16, F16 and F32, rounded for F64.
func (t *Tensor) Float32(i int) float32 {
	switch t.DType {
	case BF16:
		return BF16ToF32(binary.LittleEndian.Uint16(t.Data[2*i:]))
	case F16:
		return F16ToF32(binary.LittleEndian.Uint16(t.Data[2*i:]))
	case F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return float32(t.Float(i))
}

// Int returns element i as int64: exact for integer dtypes, truncated toward
// zero for floats.
func (t *Tensor) Int(i int) int64 {
	switch t.DType {
	case I32:
		return int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
	case I64:
		return int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
	case U8, Bool:
		return int64(t.Data[i])
	}
	return int64(t.Float(i))
}

// Floats64 decodes len(dst) elements starting at element start into dst.
func (t *Tensor) Floats64(start int, dst []float64) {
	switch t.DType {
	case BF16:
		b := t.Data[2*start : 2*(start+len(dst))]
		for i := range dst {
			dst[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16))
		}
	case F32:
		b := t.Data[4*start : 4*(start+len(dst))]
		for i := range dst {
			dst[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	default:
		for i := range dst {
			dst[i] = t.Float(start + i)
		}
	}
}

// Floats32 decodes len(dst) elements starting at element start into dst, as
// Float32 does for one.
func (t *Tensor) Floats32(start int, dst []float32) {
	switch t.DType {
	case BF16:
		b := t.Data[2*start : 2*(start+len(dst))]
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	case F32:
		b := t.Data[4*start : 4*(start+len(dst))]
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	default:
		for i := range dst {
			dst[i] = t.Float32(start + i)
		}
	}
}

// Uint16s returns the raw 16-bit patterns of elements [start, start+n) of a
// BF16 or F16 tensor, decoded into dst (which must hold n).
func (t *Tensor) Uint16s(start int, dst []uint16) {
	b := t.Data[2*start : 2*(start+len(dst))]
	for i := range dst {
		dst[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
}

// NewTensor allocates a zeroed tensor.
func NewTensor(name string, dtype DType, shape ...int) *Tensor {
	t := &Tensor{Name: name, DType: dtype, Shape: append([]int(nil), shape...)}
	t.Data = make([]byte, t.NumElements()*dtype.Size())
	return t
}

// SetFloat stores v into element i, rounded to the tensor's dtype (integers
// truncate toward zero).
func (t *Tensor) SetFloat(i int, v float64) {
	switch t.DType {
	case BF16:
		binary.LittleEndian.PutUint16(t.Data[2*i:], F32ToBF16(float32(v)))
	case F16:
		binary.LittleEndian.PutUint16(t.Data[2*i:], F32ToF16(float32(v)))
	case F32:
		binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(float32(v)))
	case F64:
		binary.LittleEndian.PutUint64(t.Data[8*i:], math.Float64bits(v))
	default:
		t.SetInt(i, int64(v))
	}
}

// SetInt stores v into element i (floats convert; U8 and BOOL keep the low byte).
func (t *Tensor) SetInt(i int, v int64) {
	switch t.DType {
	case I32:
		binary.LittleEndian.PutUint32(t.Data[4*i:], uint32(int32(v)))
	case I64:
		binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(v))
	case U8, Bool:
		t.Data[i] = byte(v)
	default:
		t.SetFloat(i, float64(v))
	}
}

// FromFloat32s builds a tensor of dtype from float32 values, rounding each.
func FromFloat32s(name string, dtype DType, shape []int, v []float32) *Tensor {
	t := NewTensor(name, dtype, shape...)
	if len(v) != t.NumElements() {
		panic(fmt.Sprintf("engine.FromFloat32s: %d values for shape %v", len(v), shape))
	}
	for i, x := range v {
		t.SetFloat(i, float64(x))
	}
	return t
}

// FromFloat64s builds a tensor of dtype from float64 values, rounding each
// (through float32 for BF16 and F16).
func FromFloat64s(name string, dtype DType, shape []int, v []float64) *Tensor {
	t := NewTensor(name, dtype, shape...)
	if len(v) != t.NumElements() {
		panic(fmt.Sprintf("engine.FromFloat64s: %d values for shape %v", len(v), shape))
	}
	for i, x := range v {
		t.SetFloat(i, x)
	}
	return t
}

// FromInts builds an integer tensor from int64 values.
func FromInts(name string, dtype DType, shape []int, v []int64) *Tensor {
	t := NewTensor(name, dtype, shape...)
	if len(v) != t.NumElements() {
		panic(fmt.Sprintf("engine.FromInts: %d values for shape %v", len(v), shape))
	}
	for i, x := range v {
		t.SetInt(i, x)
	}
	return t
}

// Ints returns every element as int64 (for the small integer tensors: tokens,
// counters, ids).
func (t *Tensor) Ints() []int64 {
	out := make([]int64, t.NumElements())
	for i := range out {
		out[i] = t.Int(i)
	}
	return out
}
