package session

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
)

func TestDiff(t *testing.T) {
	before := testDump(t, engine.OpSoftmax, 40, 4000, []int{3, 7})
	after := testDump(t, engine.OpSoftmax, 40, 4000, []int{7, 9})
	renorm := testDump(t, engine.OpRenorm, 40, 4000, nil)
	s := New(cpu.New())
	admit, err := s.Admit(context.Background(), Job{DumpPath: before})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		a, b      string
		maxMemory int64
		refusal   string // words of the *InputError, "" for none
		budget    bool
	}{
		{name: "same op, different inputs", a: before, b: after},
		{name: "the same dump", a: before, b: before},
		{name: "two ops", a: before, b: renorm, refusal: "is a run of op softmax and upload-123.safetensors one of op renorm"},
		{name: "each fits, both do not", a: before, b: after, maxMemory: admit.Memory + 1<<20, refusal: "comparing upload-123.safetensors with upload-123.safetensors needs about", budget: true},
		{name: "both fit", a: before, b: after, maxMemory: 2 * admit.Memory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.MaxMemory = tt.maxMemory
			d, err := s.Diff(context.Background(), Job{DumpPath: tt.a}, Job{DumpPath: tt.b})
			if tt.refusal != "" {
				var ie *InputError
				if !errors.As(err, &ie) || !strings.Contains(ie.Msg, tt.refusal) || ie.OverBudget != tt.budget {
					t.Fatalf("error %v, want an *InputError saying %q (over budget %t)", err, tt.refusal, tt.budget)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Inputs.Same != (tt.a == tt.b) {
				t.Errorf("same inputs %t (%s)", d.Inputs.Same, d.Inputs.Why)
			}
			if tt.a == tt.b && (d.Worse || !slices.Equal(d.Outputs[1].Fixed, []int{})) {
				t.Errorf("the same dump twice: worse %t, fixed %v", d.Worse, d.Outputs[1].Fixed)
			}
		})
	}
}
