package session

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestHistBin: every error lands in the histogram bin whose edges hold it.
func TestHistBin(t *testing.T) {
	tests := []struct {
		name string
		err  float64
		want int
	}{
		{"exact", 0, 0},
		{"below the first edge", 1e-15, 1},
		{"first edge", 1e-12, 1},
		{"half a decade up", 3.2e-12, 2},
		{"1e-5", 1e-5, 15},
		{"just under 1", 0.99, HistBins - 2},
		{"1 and above", 3, HistBins - 1},
		{"NaN", math.NaN(), HistBins - 1},
		{"Inf", math.Inf(1), HistBins - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HistBin(tt.err); got != tt.want {
				t.Errorf("HistBin(%g) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
	// Every error lands in the bin whose edges hold it.
	for i := 0; i < 1000; i++ {
		e := math.Pow(10, -12+12*rand.Float64())
		b := HistBin(e)
		if e < HistEdge(b)*(1-1e-12) || b < HistBins-1 && e >= HistEdge(b+1)*(1+1e-12) {
			t.Fatalf("HistBin(%g) = %d with edges [%g, %g)", e, b, HistEdge(b), HistEdge(b+1))
		}
	}
}
