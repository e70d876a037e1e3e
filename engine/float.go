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

// MarshalJSON writes a step with its float fields as Float, so a NaN target
// probability (a target row without a distribution) survives JSON.
func (s SpecStep) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Draft     int32 `json:"draft"`
		U         Float `json:"u"`
		P         Float `json:"p"`
		Q         Float `json:"q"`
		Accepted  bool  `json:"accepted"`
		Resampled int32 `json:"resampled"`
	}{s.Draft, Float(s.U), Float(s.P), Float(s.Q), s.Accepted, s.Resampled})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *SpecStep) UnmarshalJSON(b []byte) error {
	var v struct {
		Draft     int32 `json:"draft"`
		U         Float `json:"u"`
		P         Float `json:"p"`
		Q         Float `json:"q"`
		Accepted  bool  `json:"accepted"`
		Resampled int32 `json:"resampled"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = SpecStep{v.Draft, float32(v.U), float32(v.P), float32(v.Q), v.Accepted, v.Resampled}
	return nil
}
