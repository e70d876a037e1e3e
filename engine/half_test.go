package engine

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// f16Slow rounds through float64 arithmetic, independent of the bit tricks.
func f16Slow(f float32) float32 {
	x := float64(f)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return f
	}
	a := math.Abs(x)
	if a >= 65520 {
		return float32(math.Copysign(math.Inf(1), x))
	}
	e := math.Floor(math.Log2(a))
	if e < -14 {
		e = -14
	}
	q := math.Ldexp(1, int(e)-10) // spacing of f16 values at this exponent
	r := math.RoundToEven(a/q) * q
	return float32(math.Copysign(r, x))
}

func TestF16RoundTrip(t *testing.T) {
	// Every f16 bit pattern widens and narrows back to itself.
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			if g := F32ToF16(f); g&0x7c00 != 0x7c00 || g&0x3ff == 0 {
				t.Fatalf("NaN %#04x narrowed to non-NaN %#04x", h, g)
			}
			continue
		}
		if g := F32ToF16(f); g != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, g)
		}
	}
}

func TestF32ToF16MatchesSlowRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1_000_000; i++ {
		f := math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			continue
		}
		got := F16ToF32(F32ToF16(f))
		want := f16Slow(f)
		if got != want && !(got == 0 && want == 0) {
			t.Fatalf("F32ToF16(%g) = %g, want %g", f, got, want)
		}
	}
}

func TestBF16Rounding(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want float32
	}{
		{"exact", 1.5, 1.5},
		{"tie to even down", math.Float32frombits(0x3f808000), 1},
		{"tie to even up", math.Float32frombits(0x3f818000), math.Float32frombits(0x3f820000)},
		{"above tie", math.Float32frombits(0x3f808001), math.Float32frombits(0x3f810000)},
		{"overflow to inf", math.MaxFloat32, float32(math.Inf(1))},
		{"negative", -2.25, -2.25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BF16ToF32(F32ToBF16(tt.in)); got != tt.want {
				t.Errorf("bf16(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
	if nan := BF16ToF32(F32ToBF16(float32(math.NaN()))); !math.IsNaN(float64(nan)) {
		t.Errorf("NaN narrowed to %v", nan)
	}
}

func TestFloatJSON(t *testing.T) {
	tests := []struct {
		in   Float
		want string
	}{
		{1.5, "1.5"}, {Float(math.NaN()), `"NaN"`}, {Float(math.Inf(1)), `"+Inf"`}, {Float(math.Inf(-1)), `"-Inf"`},
	}
	for _, tt := range tests {
		b, err := tt.in.MarshalJSON()
		if err != nil || string(b) != tt.want {
			t.Errorf("MarshalJSON(%v) = %s, %v; want %s", tt.in, b, err, tt.want)
		}
		var back Float
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatalf("UnmarshalJSON(%s): %v", b, err)
		}
		if back != tt.in && !(math.IsNaN(float64(back)) && math.IsNaN(float64(tt.in))) {
			t.Errorf("round trip %v -> %s -> %v", tt.in, b, back)
		}
	}
}

func TestSpecStepJSONKeepsNaN(t *testing.T) {
	in := SpecStep{Draft: 3, U: 0.25, P: float32(math.NaN()), Q: 1, Accepted: false, Resampled: -1}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var out SpecStep
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if out.Draft != 3 || out.U != 0.25 || !math.IsNaN(float64(out.P)) || out.Q != 1 || out.Resampled != -1 {
		t.Errorf("round trip %+v -> %s -> %+v", in, b, out)
	}
}

func TestDTypeTextRoundTrip(t *testing.T) {
	for d := DTypeInvalid; d <= Bool; d++ {
		b, err := d.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%v): %v", d, err)
		}
		var back DType
		if err := back.UnmarshalText(b); err != nil || back != d {
			t.Errorf("%v -> %s -> %v, %v", d, b, back, err)
		}
	}
	var d DType
	if err := d.UnmarshalText([]byte("F8")); err == nil {
		t.Errorf("UnmarshalText(F8) accepted")
	}
}
