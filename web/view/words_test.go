package view

import "testing"

func TestSentence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"dump.npz: tensor \"logits\": shape [2] needs 2 dims", "dump.npz: tensor \"logits\": shape [2] needs 2 dims."},
		{"top-p must be in (0, 1]", "Top-p must be in (0, 1]."},
		{"Already one.", "Already one."},
		{"", "The dump cannot be used."},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Sentence(tt.in); got != tt.want {
				t.Errorf("Sentence(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
