package engine

import (
	"slices"
	"testing"
)

// Numbers a person compares are written with enough digits to differ, and
// float32 parameters without float64's noise.
func TestFormatNumbers(t *testing.T) {
	if got := FormatParam(float64(float32(1e-4))); got != "0.0001" {
		t.Errorf("FormatParam(float32 1e-4) = %q, want 0.0001", got)
	}
	if got := FormatParam(0.1); got != "0.1" {
		t.Errorf("FormatParam(0.1) = %q", got)
	}
	tests := []struct {
		in   []float64
		want []string
	}{
		{[]float64{12.375, 12.25}, []string{"12.4", "12.2"}},
		{[]float64{12.5, 3}, []string{"12", "3"}},
		{[]float64{14, 14}, []string{"14", "14"}},
		{[]float64{-1.5, 12.25}, []string{"-1.5", "12"}},
		{[]float64{1.0000001, 1}, []string{"1.0000001", "1"}},
		{[]float64{3.1e-7, 3.2e-7}, []string{"3.1e-07", "3.2e-07"}},
	}
	for _, tt := range tests {
		if got := FormatDistinct(tt.in...); !slices.Equal(got, tt.want) {
			t.Errorf("FormatDistinct(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The reference's sentences write a float32 parameter without float64's
// digits: "T = 0.0001", not "T = 9.999999747378752e-05".
func TestFormatParamOfFloat32(t *testing.T) {
	for _, v := range []float32{1e-4, 0.7, -0.1, 3.4e38} {
		got := FormatParam(float64(v))
		if len(got) > 8 {
			t.Errorf("FormatParam(float32 %v) = %q", v, got)
		}
	}
}
