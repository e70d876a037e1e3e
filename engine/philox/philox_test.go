package philox

import (
	"math"
	"testing"
)

// Known-answer vectors from Random123's kat_vectors for philox4x32_10.
func TestBlockKnownAnswers(t *testing.T) {
	tests := []struct {
		name string
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{"zeros", [4]uint32{}, [2]uint32{}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{"ones", [4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
			[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{"pi", [4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
			[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Block(tt.key, tt.ctr); got != tt.want {
				t.Errorf("Block = %08x, want %08x", got, tt.want)
			}
		})
	}
}

func TestStreamCounterLayout(t *testing.T) {
	s := NewStream(0x1122334455667788, 0xfffffffe, 7, 3)
	got := s.Block(5)
	want := Block([2]uint32{0x55667788, 0x11223344}, [4]uint32{0x00000003, 0x00000001, 7, 3})
	if got != want {
		t.Errorf("stream block = %08x, want %08x (offset carries into the high word)", got, want)
	}
}

func TestUniformRanges(t *testing.T) {
	for _, w := range []uint32{0, 1, 255, 256, 1 << 31, math.MaxUint32} {
		if u := U01(w); u < 0 || u >= 1 {
			t.Errorf("U01(%#x) = %v, outside [0, 1)", w, u)
		}
		if u := OpenU01(w); u <= 0 || u >= 1 {
			t.Errorf("OpenU01(%#x) = %v, outside (0, 1)", w, u)
		}
	}
	if U01(math.MaxUint32) != float32(1-1.0/(1<<24)) {
		t.Errorf("U01 max = %v", U01(math.MaxUint32))
	}
}

func TestWeightAndPick(t *testing.T) {
	tests := []struct {
		p    float32
		want uint64
	}{
		{0, 0}, {-1, 0}, {float32(math.NaN()), 0}, {1, WeightScale}, {2, WeightScale},
		{0.5, WeightScale / 2}, {float32(math.Ldexp(1, -41)), 0}, {float32(math.Ldexp(1, -40)), 1},
	}
	for _, tt := range tests {
		if got := Weight(tt.p); got != tt.want {
			t.Errorf("Weight(%v) = %d, want %d", tt.p, got, tt.want)
		}
	}
	const total = 1000
	if got := Pick(0, total); got != 0 {
		t.Errorf("Pick(0) = %d", got)
	}
	if got := Pick(math.MaxUint64, total); got != total-1 {
		t.Errorf("Pick(max) = %d, want %d", got, total-1)
	}
	if got := Pick(1<<63, total); got != total/2 {
		t.Errorf("Pick(half) = %d, want %d", got, total/2)
	}
}
