package engine

import (
	"math"
	"slices"
	"strconv"
	"testing"
)

// formatCase is one case of FormatSig, FormatPercent or FormatP.
type formatCase struct {
	Name   string
	Func   string // "sig", "percent" or "p"
	V      float64
	LogP   float64 // for "p"
	Digits int     // for "sig"
	Want   string
}

// formatCases hold issue 27's numbers among others: "(1e+02%)", "p =
// 9.8e-10653". web/static/numfmt.js is checked against these functions
// in web's TestNumfmtMirrorsGo.
var formatCases = []formatCase{
	{"small error", "sig", 0.0021, 0, 2, "0.0021"},
	{"tolerance", "sig", 1e-5, 0, 2, "1e-05"},
	{"below plain", "sig", 3.14159e-7, 0, 3, "3.14e-07"},
	{"plain edge", "sig", 0.0001, 0, 2, "0.0001"},
	{"rounds into plain", "sig", 0.000099996, 0, 2, "0.0001"},
	{"tens", "sig", 12.34, 0, 2, "12"},
	{"no 1e+03", "sig", 1234, 0, 2, "1234"},
	{"rounds up a decade", "sig", 9.96, 0, 2, "10"},
	{"whole part rounded to its units", "sig", 1234.5, 0, 2, "1234"},
	{"whole part rounded up", "sig", 1234.7, 0, 2, "1235"},
	// Rounded up a decade at the digits asked for, not at the units: the
	// whole part still rounds to its units, never a fraction kept.
	{"rounds up a decade past the digits", "sig", 99.7, 0, 2, "100"},
	{"rounds up to 100000", "sig", 99999.6, 0, 2, "100000"},
	{"rounds up to 1000", "sig", 999.7, 0, 3, "1000"},
	{"stays below the decade at the units", "sig", 99960, 0, 2, "99960"},
	{"ties to even", "sig", 0.125, 0, 2, "0.12"},
	{"a bf16 logit", "sig", 12.375, 0, 3, "12.4"},
	{"rounds into exponent form", "sig", 999999.5, 0, 3, "1e+06"},
	{"millions", "sig", 3e6, 0, 2, "3e+06"},
	{"rounds to a million", "sig", 999999.7, 0, 2, "1e+06"},
	{"negative", "sig", -1.5, 0, 4, "-1.5"},
	{"four digits", "sig", 0.77045285, 0, 4, "0.7705"},
	{"tiny", "sig", 2.5e-120, 0, 3, "2.5e-120"},
	{"zero", "sig", 0, 0, 2, "0"},
	{"negative zero", "sig", math.Copysign(0, -1), 0, 2, "0"},
	{"rounds to zero stays signless", "sig", -0.00001, 0, 1, "-1e-05"},
	{"+Inf", "sig", math.Inf(1), 0, 2, "+Inf"},
	{"-Inf", "sig", math.Inf(-1), 0, 2, "-Inf"},
	{"NaN", "sig", math.NaN(), 0, 2, "NaN"},
	{"all", "percent", 1, 0, 0, "100%"},
	{"not 1e+02%", "percent", 4096.0 / 4096, 0, 0, "100%"},
	{"almost all", "percent", 0.999, 0, 0, "99.9%"},
	{"closer to all", "percent", 0.9996, 0, 0, "99.96%"},
	{"as good as all", "percent", 1 - 1e-12, 0, 0, "> 99.9999%"},
	{"a rounding residue", "percent", 5.55e-17, 0, 0, "< 0.0001%"},
	{"rate", "percent", 0.7342, 0, 0, "73.4%"},
	{"small share", "percent", 37.0 / 32000, 0, 0, "0.116%"},
	{"none", "percent", 0, 0, 0, "0%"},
	{"p", "p", 0.0123, math.Log(0.0123), 0, "0.012"},
	{"p tiny", "p", 3.1e-12, math.Log(3.1e-12), 0, "3.1e-12"},
	// Past float64's range the digits say nothing (issue 27: "p =
	// 9.8e-10653"): every such p is written the one way.
	{"p underflowed", "p", 0, -10652 * math.Ln10, 0, "< 1e-300"},
	{"p subnormal", "p", 1e-310, math.Log(1e-310), 0, "< 1e-300"},
	{"p exactly 0", "p", 0, math.Inf(-1), 0, "0"},
}

func TestFormatCases(t *testing.T) {
	for _, tt := range formatCases {
		t.Run(tt.Name, func(t *testing.T) {
			var got string
			switch tt.Func {
			case "sig":
				got = FormatSig(tt.V, tt.Digits)
			case "percent":
				got = FormatPercent(tt.V)
			case "p":
				got = FormatP(tt.V, tt.LogP)
			}
			if got != tt.Want {
				t.Errorf("%s(%v) = %q, want %q", tt.Func, tt.V, got, tt.Want)
			}
		})
	}
}

func TestPText(t *testing.T) {
	tests := []struct {
		name    string
		p, logP float64
		want    string
	}{
		{"underflowed", 0, -1000 * math.Ln10, "p < 1e-300"},
		{"ordinary", 0.0123, math.Log(0.0123), "p = 0.012"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PText(tt.p, tt.logP); got != tt.want {
				t.Errorf("PText = %q, want %q", got, tt.want)
			}
			// A report keeps p without its log: 0 there is an underflow.
			if got := StoredPText(math.Max(tt.p, 0)); got != tt.want {
				t.Errorf("StoredPText(%v) = %q, want %q", tt.p, got, tt.want)
			}
		})
	}
	// The CLI's table writes a stored p as the sentences do: a subnormal
	// p reads "< 1e-300", like one that underflowed to 0.
	for p, want := range map[float64]string{0: "< 1e-300", 4.9e-324: "< 1e-300", 1e-310: "< 1e-300", 0.0123: "0.012"} {
		if got := FormatStoredP(p); got != want {
			t.Errorf("FormatStoredP(%v) = %q, want %q", p, got, want)
		}
	}
}

func TestFormatShare(t *testing.T) {
	tests := []struct {
		n, of int
		want  string
	}{{4096, 4096, "100%"}, {999, 1000, "99.9%"}, {37, 32000, "0.116%"}, {1, 10, "10%"}, {0, 0, "0%"}}
	for _, tt := range tests {
		if got := FormatShare(tt.n, tt.of); got != tt.want {
			t.Errorf("FormatShare(%d, %d) = %q, want %q", tt.n, tt.of, got, tt.want)
		}
	}
}

// Numbers a person compares are written with enough digits to differ:
// issue 27's fragile note printed 12.375 against 12.25 as "logit 12 …
// maximum 12".
func TestFormatDistinct(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want []string
	}{
		{"issue 27's fragile note", []float64{12.375, 12.25}, []string{"12.4", "12.2"}},
		{"apart already", []float64{12.5, 3}, []string{"12", "3"}},
		{"equal", []float64{14, 14}, []string{"14", "14"}},
		{"signs", []float64{-1.5, 12.25}, []string{"-1.5", "12"}},
		{"one ulp of float32 apart", []float64{1.0000001, 1}, []string{"1.0000001", "1"}},
		{"small", []float64{3.1e-7, 3.2e-7}, []string{"3.1e-07", "3.2e-07"}},
		{"NaN twice", []float64{math.NaN(), math.NaN()}, []string{"NaN", "NaN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatDistinct(tt.in...); !slices.Equal(got, tt.want) {
				t.Errorf("FormatDistinct(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// Parameters are written as the kernel sees them: issue 27's "T =
// 9.999999747378752e-05" is "T = 0.0001"; the text reads back to the same
// float32.
func TestFormatParam(t *testing.T) {
	tests := []struct {
		name string
		v    float64
		want string
	}{
		{"issue 27's temperature", float64(float32(1e-4)), "0.0001"},
		{"float32 0.7", float64(float32(0.7)), "0.7"},
		{"float32 -0.1", float64(float32(-0.1)), "-0.1"},
		{"float32 max", float64(float32(3.4e38)), "3.4e+38"},
		{"float64 0.1", 0.1, "0.1"},
		{"float64 only", 0.1 + 1e-12, "0.100000000001"},
		{"+Inf", math.Inf(1), "+Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FormatParam(tt.v)
			if got != tt.want {
				t.Errorf("FormatParam(%v) = %q, want %q", tt.v, got, tt.want)
			}
			if f := float32(tt.v); float64(f) == tt.v {
				back, err := strconv.ParseFloat(got, 32)
				if err != nil || float32(back) != f {
					t.Errorf("FormatParam(%v) = %q reads back as %v (%v)", tt.v, got, back, err)
				}
			}
		})
	}
}

// Tolerances keep one spelling whatever their size (issue 27: a field
// that changed from "1e-05" to "0.00001").
func TestFormatFloatTolerances(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{{1e-5, "1e-05"}, {1e-4, "0.0001"}, {0.016, "0.016"}, {2, "2"}, {math.Inf(1), "+Inf"}}
	for _, tt := range tests {
		if got := FormatFloat(tt.v); got != tt.want {
			t.Errorf("FormatFloat(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
