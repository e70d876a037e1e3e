package stats

import (
	"math"
	"slices"
	"testing"
)

func TestBHTextbook(t *testing.T) {
	// Benjamini & Hochberg (1995), section 4: fifteen p-values from a study
	// of myocardial infarction treatment. At q = 0.05 the procedure rejects
	// the four smallest; Bonferroni (0.05/15) rejects three.
	p := []float64{0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344,
		0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000}
	// Shuffle so that the answer cannot depend on sorted input.
	rng := newRand(41)
	perm := rng.Perm(len(p))
	shuffled := make([]float64, len(p))
	for i, j := range perm {
		shuffled[j] = p[i]
	}
	got := BH(shuffled, 0.05)
	bonf := Bonferroni(0.05, len(p))
	var bh, bf int
	for j, flagged := range got {
		if want := shuffled[j] <= 0.0095; flagged != want {
			t.Errorf("p = %v flagged %v, want %v", shuffled[j], flagged, want)
		}
		if flagged {
			bh++
		}
		if shuffled[j] <= bonf {
			bf++
		}
	}
	if bh != 4 || bf != 3 {
		t.Errorf("BH flags %d, Bonferroni %d; want 4 and 3", bh, bf)
	}
}

func TestBHEdges(t *testing.T) {
	tests := []struct {
		name string
		p    []float64
		q    float64
		want []bool
	}{
		{"empty", nil, 0.05, []bool{}},
		{"NaN never flagged", []float64{math.NaN(), 0.001}, 0.05, []bool{false, true}},
		{"step-up flags an earlier miss", []float64{0.04, 0.03, 0.045}, 0.05, []bool{true, true, true}},
		{"none", []float64{0.5, 0.9, 0.2}, 0.05, []bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BH(tt.p, tt.q); !slices.Equal(got, tt.want) {
				t.Errorf("BH = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFalseAlarms(t *testing.T) {
	tests := []struct {
		name       string
		rows       int
		threshold  float64
		expected   float64
		any        float64
		bonferroni float64
	}{
		{"512 rows at 1e-6", 512, 1e-6, 5.12e-4, 5.1187e-4, 0.05 / 512},
		{"one row", 1, 0.05, 0.05, 0.05, 0.05},
		{"no rows", 0, 0.05, 0, 0, 0.05},
		{"many rows at 0.05", 100, 0.05, 5, 0.99408, 5e-4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExpectedFalseAlarms(tt.rows, tt.threshold); math.Abs(got-tt.expected) > 1e-12 {
				t.Errorf("ExpectedFalseAlarms = %v, want %v", got, tt.expected)
			}
			if got := AnyFalseAlarm(tt.rows, tt.threshold); math.Abs(got-tt.any) > 1e-5 {
				t.Errorf("AnyFalseAlarm = %v, want %v", got, tt.any)
			}
			if got := Bonferroni(0.05, tt.rows); math.Abs(got-tt.bonferroni) > 1e-15 {
				t.Errorf("Bonferroni = %v, want %v", got, tt.bonferroni)
			}
		})
	}
}

func TestChanceLine(t *testing.T) {
	tests := []struct {
		rows, failed int
		threshold    float64
		want         string
	}{
		{512, 0, 1e-6, "0 of 512 rows fail at p < 1e-06; chance alone gives 0.00051 failing rows (a 0.051% chance that any row fails)"},
		{512, 3, 0.05, "3 of 512 rows fail at p < 0.05; chance alone gives 26 failing rows (a 100% chance that any row fails)"},
		{20, 1, 0.01, "1 of 20 rows fail at p < 0.01; chance alone gives 0.2 failing rows (a 18% chance that any row fails)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := ChanceLine(tt.rows, tt.failed, tt.threshold); got != tt.want {
				t.Errorf("ChanceLine =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
