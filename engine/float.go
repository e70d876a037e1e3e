package engine

import (
	"encoding/json"
	"math"
	"strconv"
)

// Float is a float64 that survives JSON when it is not finite: NaN and ±Inf
// are written as the strings "NaN", "+Inf" and "-Inf" (encoding/json refuses
// them), finite values as numbers. Drift statistics use it because a NaN
// output gives NaN errors and a dropped token gives an infinite KL.
type Float float64

// MarshalJSON writes f as a number, or as a string when it is not finite.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *Float) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		*f = Float(v)
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}
