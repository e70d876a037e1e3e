package engine

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestForKernels(t *testing.T) {
	valid := func() Params {
		return Params{
			Temperature: []float64{0, 0.7}, TopK: []int{0, 50}, TopP: []float64{1, 0.9}, MinP: []float64{0, 0.05},
			Seed: []uint64{1, 2}, Offset: []uint64{3, 4}, FilterOrder: Joint, TopKTies: TiesLowestIndex,
		}
	}
	all := NeedTemperature | NeedFilters | NeedSeeds
	tests := []struct {
		name        string
		edit        func(*Params)
		need        ParamGroup
		want        string // error text, "" for none
		unsupported bool
	}{
		{"valid", func(*Params) {}, all, "", false},
		{"short temperature", func(p *Params) { p.Temperature = p.Temperature[:1] }, all, "temperature: 1 values for 2 rows", false},
		{"negative temperature", func(p *Params) { p.Temperature[1] = -1 }, all, "row 1: temperature must be a finite number >= 0 in float32 (0 means greedy), not -1", false},
		{"temperature past float32", func(p *Params) { p.Temperature[0] = 1e39 }, all, "row 0: temperature must be a finite number >= 0 in float32 (0 means greedy), not 1e+39", false},
		{"NaN temperature", func(p *Params) { p.Temperature[0] = math.NaN() }, all, "row 0: temperature must be a finite number >= 0 in float32 (0 means greedy), not NaN", false},
		{"negative top_k", func(p *Params) { p.TopK[1] = -1 }, all, "row 1: top_k must be an integer in [0, 2147483647] (0 means off), not -1", false},
		{"top_p 0", func(p *Params) { p.TopP[0] = 0 }, all, "row 0: top_p must be in (0, 1] (1 means off), and above 0 in float32, not 0", false},
		{"min_p above 1", func(p *Params) { p.MinP[1] = 1.5 }, all, "row 1: min_p must be in [0, 1] (0 means off), not 1.5", false},
		{"unknown order", func(p *Params) { p.FilterOrder = "sideways" }, all, `filter_order must be top_k_first, joint or min_p_first, not "sideways"`, true},
		{"unknown ties", func(p *Params) { p.TopKTies = "random" }, all, `top_k_ties must be keep, lowest_index or any, not "random"`, true},
		{"unknown temperature order", func(p *Params) { p.TemperatureOrder = "middle" }, all, `temperature_order must be first or last, not "middle"`, true},
		{"missing offsets", func(p *Params) { p.Offset = nil }, all, "offset: 0 values for 2 rows", false},
		{"groups not needed are not checked", func(p *Params) { p.TopK, p.Seed = nil, nil }, NeedTemperature, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			tt.edit(&p)
			k, err := p.ForKernels(2, tt.need)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ForKernels: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to say %q", err, tt.want)
			}
			if errors.Is(err, ErrUnsupported) != tt.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v", !tt.unsupported)
			}
			if k != nil {
				t.Errorf("got params with an error")
			}
		})
	}

	p := valid()
	k, err := p.ForKernels(2, NeedTemperature)
	if err != nil {
		t.Fatal(err)
	}
	if k.TopP[1] != 1 || k.TopK[1] != 0 || k.MinP[1] != 0 || k.Order != TopKFirst || k.Ties != TiesKeep || k.Seed[1] != 0 {
		t.Errorf("groups not needed should hold their off values: %+v", k)
	}
	if k.Filtered(1, 100) {
		t.Errorf("Filtered with filters off")
	}
	k, _ = p.ForKernels(2, NeedFilters)
	if !k.Filtered(1, 100) || k.Filtered(0, 100) || k.Order != Joint || k.Ties != TiesLowestIndex {
		t.Errorf("filters: %+v", k)
	}
}

// TestForKernelsSimplifiesChain checks that min_p_first and temperature
// last reach the kernels only where some row keeps other tokens under them,
// and that ties any reaches them as lowest_index, one of the choices it
// allows.
func TestForKernelsSimplifiesChain(t *testing.T) {
	tests := []struct {
		name        string
		temperature float64
		topP, minP  float64
		order       FilterOrder
		temp        TemperatureOrder
		wantOrder   FilterOrder
		wantTemp    TemperatureOrder
	}{
		{"min_p_first with top-p and min-p", 0.7, 0.9, 0.1, MinPFirst, TemperatureFirst, MinPFirst, TemperatureFirst},
		{"min_p_first without min-p", 0.7, 0.9, 0, MinPFirst, TemperatureFirst, TopKFirst, TemperatureFirst},
		{"min_p_first without top-p", 0.7, 1, 0.1, MinPFirst, TemperatureFirst, TopKFirst, TemperatureFirst},
		{"min_p_first on a greedy row", 0, 0.9, 0.1, MinPFirst, TemperatureFirst, TopKFirst, TemperatureFirst},
		{"temperature last with top-p", 0.7, 0.9, 0, TopKFirst, TemperatureLast, TopKFirst, TemperatureLast},
		{"temperature last with min-p", 1.3, 1, 0.1, TopKFirst, TemperatureLast, TopKFirst, TemperatureLast},
		{"temperature last at T = 1", 1, 0.9, 0.1, TopKFirst, TemperatureLast, TopKFirst, TemperatureFirst},
		{"temperature last with top-k alone", 0.7, 1, 0, TopKFirst, TemperatureLast, TopKFirst, TemperatureFirst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Params{
				Temperature: []float64{tt.temperature}, TopK: []int{5}, TopP: []float64{tt.topP}, MinP: []float64{tt.minP},
				FilterOrder: tt.order, TopKTies: TiesAny, TemperatureOrder: tt.temp,
			}
			k, err := p.ForKernels(1, NeedTemperature|NeedFilters)
			if err != nil {
				t.Fatal(err)
			}
			if k.Order != tt.wantOrder || k.TemperatureOrder != tt.wantTemp || k.Ties != TiesLowestIndex {
				t.Errorf("kernels get %s, %s, %s; want %s, %s, lowest_index", k.Order, k.TemperatureOrder, k.Ties, tt.wantOrder, tt.wantTemp)
			}
		})
	}
}

func TestParamGroupBytes(t *testing.T) {
	tests := []struct {
		g    ParamGroup
		want int64
	}{{0, 0}, {NeedTemperature, 4}, {NeedFilters, 12}, {NeedSeeds, 16}, {NeedTemperature | NeedFilters | NeedSeeds, 32}}
	for _, tt := range tests {
		if got := tt.g.Bytes(); got != tt.want {
			t.Errorf("ParamGroup(%d).Bytes() = %d, want %d", tt.g, got, tt.want)
		}
	}
}

func TestCheckTensor(t *testing.T) {
	good := NewTensor("logits", BF16, 2, 3)
	short := NewTensor("logits", F32, 2, 3)
	short.Data = short.Data[:20]
	tests := []struct {
		name  string
		t     *Tensor
		rank  int
		float bool
		want  string
	}{
		{"good", good, 2, true, ""},
		{"missing", nil, 2, true, "logits: missing"},
		{"rank", good, 3, true, "want 3 dimensions"},
		{"kind", good, 2, false, "want an integer dtype"},
		{"bytes", short, 2, true, "20 bytes for shape [2, 3] of F32, want 24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTensor(tt.t, "logits", tt.rank, tt.float)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("CheckTensor: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrUnsupported)):
				t.Errorf("error %v, want one wrapping ErrUnsupported that says %q", err, tt.want)
			}
		})
	}
	if got := TensorBytes(good, nil, short); got != 12+20 {
		t.Errorf("TensorBytes = %d", got)
	}
}
