package engine

import "testing"

func TestPowerGain(t *testing.T) {
	tests := []struct {
		name string
		p    *Power
		want string
	}{
		{"10^7 over 10^5", &Power{TV: 0.0011, Draws: 10_000_000, BaselineTV: 0.011}, "10^7 draws a row catch a total-variation bias of 0.0011; 10^5 would catch 0.011"},
		{"not a power of ten", &Power{TV: 0.002, Draws: 2_500_000, BaselineTV: 0.01}, "2500000 draws a row catch a total-variation bias of 0.002; 10^5 would catch 0.01"},
		{"the default draws", &Power{TV: 0.011, Draws: DefaultDraws, BaselineTV: 0.011}, ""},
		{"fewer draws", &Power{TV: 0.03, Draws: 20_000}, ""},
		{"no power", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Gain(); got != tt.want {
				t.Errorf("Gain() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDrawsText(t *testing.T) {
	for n, want := range map[int]string{100: "10^2", 100_000: "10^5", 1_000_000_000: "10^9", 10: "10", 1: "1", 200_000: "200000", 0: "0", 7: "7"} {
		if got := DrawsText(n); got != want {
			t.Errorf("DrawsText(%d) = %q, want %q", n, got, want)
		}
	}
}
