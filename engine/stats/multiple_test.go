package stats

import (
	"math"
	"testing"
)

func TestFalseAlarms(t *testing.T) {
	tests := []struct {
		name      string
		rows      int
		threshold float64
		expected  float64
		any       float64
	}{
		{"512 rows at 1e-6", 512, 1e-6, 5.12e-4, 5.1187e-4},
		{"one row", 1, 0.05, 0.05, 0.05},
		{"no rows", 0, 0.05, 0, 0},
		{"many rows at 0.05", 100, 0.05, 5, 0.99408},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExpectedFalseAlarms(tt.rows, tt.threshold); math.Abs(got-tt.expected) > 1e-12 {
				t.Errorf("ExpectedFalseAlarms = %v, want %v", got, tt.expected)
			}
			if got := AnyFalseAlarm(tt.rows, tt.threshold); math.Abs(got-tt.any) > 1e-5 {
				t.Errorf("AnyFalseAlarm = %v, want %v", got, tt.any)
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
		{512, 0, 1e-6, "0 of 512 rows fail at p < 1e-06; chance alone gives 0.00051 failing rows (a 0.0512% chance that any row fails)"},
		{512, 3, 0.05, "3 of 512 rows fail at p < 0.05; chance alone gives 26 failing rows (a > 99.9999% chance that any row fails)"},
		{20, 1, 0.01, "1 of 20 rows fail at p < 0.01; chance alone gives 0.2 failing rows (a 18.2% chance that any row fails)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := ChanceLine(tt.rows, tt.failed, tt.threshold); got != tt.want {
				t.Errorf("ChanceLine =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
