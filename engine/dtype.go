package engine

import "fmt"

// DType is the element type of a tensor, named as safetensors names it.
type DType uint8

// The dtypes a dump may hold.
const (
	DTypeInvalid DType = iota
	BF16
	F16
	F32
	F64
	I32
	I64
	U8
	Bool
)

var dtypeNames = [...]string{
	DTypeInvalid: "INVALID",
	BF16:         "BF16",
	F16:          "F16",
	F32:          "F32",
	F64:          "F64",
	I32:          "I32",
	I64:          "I64",
	U8:           "U8",
	Bool:         "BOOL",
}

var dtypeSizes = [...]int{BF16: 2, F16: 2, F32: 4, F64: 8, I32: 4, I64: 8, U8: 1, Bool: 1}

// String returns the safetensors name of d ("BF16", "F32", ...).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", d)
}

// Size returns the bytes one element of d occupies, or 0 for an invalid dtype.
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether d holds floating-point values.
func (d DType) IsFloat() bool { return d == BF16 || d == F16 || d == F32 || d == F64 }

// IsInt reports whether d holds integers (U8 and BOOL included).
func (d DType) IsInt() bool { return d == I32 || d == I64 || d == U8 || d == Bool }

// Precision orders float dtypes from least (BF16) to most precise (F64); it is
// what picks the looser of two tolerances. Non-float dtypes rank as F64.
func (d DType) Precision() int {
	switch d {
	case BF16:
		return 0
	case F16:
		return 1
	case F32:
		return 2
	}
	return 3
}

// ParseDType maps a safetensors dtype name to a DType. It accepts "BOOL" and
// "bool" alike and nothing else that is not in the table.
func ParseDType(s string) (DType, error) {
	for d, name := range dtypeNames {
		if d != int(DTypeInvalid) && name == s {
			return DType(d), nil
		}
	}
	if s == "bool" {
		return Bool, nil
	}
	return DTypeInvalid, fmt.Errorf("unknown dtype %q", s)
}

// MarshalText writes d by its safetensors name, so reports say "BF16".
func (d DType) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a safetensors dtype name, and "INVALID", which
// MarshalText writes for runs without a float input (ngram_match).
func (d *DType) UnmarshalText(b []byte) error {
	if string(b) == dtypeNames[DTypeInvalid] {
		*d = DTypeInvalid
		return nil
	}
	v, err := ParseDType(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
