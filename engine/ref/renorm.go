package ref

import "github.com/sampviz/sampviz/engine"

// Filter holds the filter parameters of one row (SEMANTICS.md "Filters").
// NoFilter returns the one that filters nothing.
type Filter struct {
	TopK  int     // 0 or >= V: off
	TopP  float64 // in (0, 1]; 1 or more: off (0 keeps only the most probable)
	MinP  float64 // in [0, 1]; 0: off
	Order engine.FilterOrder
	Ties  engine.TopKTies
	// Temperature is where the temperature applies ("": first); under
	// engine.TemperatureLast the filters are decided on the softmax at
	// temperature 1.
	Temperature engine.TemperatureOrder
	// Eps is the relative width of the boundary band (BoundaryEps).
	Eps float64
}

// NoFilter returns the Filter of softmax: nothing filtered.
func NoFilter() Filter { return Filter{TopP: 1} }

// BoundaryEps returns the boundary band SEMANTICS.md prescribes for a strict
// tolerance's rtol: max(1e-5, rtol). The floor covers the relative error of
// float32 weights (about |z|·2^-24 plus a few ulp of the exp), which the
// masses that decide a cut add up.
func BoundaryEps(strictRtol float64) float64 { return max(1e-5, strictRtol) }

// RowFilter returns row r's filters with boundary band eps (BoundaryEps).
// Missing per-row entries read as off.
func RowFilter(run *engine.Run, r int, eps float64) Filter {
	p := &run.Params
	f := Filter{TopP: 1, Order: p.FilterOrder, Ties: p.TopKTies, Temperature: p.TemperatureOrder, Eps: eps}
	if r >= 0 && r < len(p.TopK) {
		f.TopK = p.TopK[r]
	}
	if r >= 0 && r < len(p.TopP) {
		f.TopP = p.TopP[r]
	}
	if r >= 0 && r < len(p.MinP) {
		f.MinP = p.MinP[r]
	}
	return f
}

// Renorm returns the renorm reference of row r of run.Logits with the row's
// filters, strict or native; eps is the boundary band (BoundaryEps).
func Renorm(run *engine.Run, r int, native bool, eps float64) Dist {
	var ws Workspace
	var d Dist
	ws.Compute(&d, rowOf(run, r), Temperature(run, r), RowFilter(run, r, eps), native)
	return d
}

// topKOn, topPOn and minPOn report which filters are active for v tokens.
func (f Filter) topKOn(v int) bool { return f.TopK > 0 && f.TopK < v }

func (f Filter) topPOn() bool { return f.TopP < 1 }

func (f Filter) minPOn() bool { return f.MinP > 0 }

// Active reports whether any filter is active for a row of v tokens.
func (f Filter) Active(v int) bool { return f.topKOn(v) || f.topPOn() || f.minPOn() }

// atUnitTemperature reports whether the filters of a row of v tokens at
// temperature t are decided on other probabilities than the row's: under
// engine.TemperatureLast, when t is not 1 and a filter is active.
func (f Filter) atUnitTemperature(v int, t float64) bool {
	return f.Temperature == engine.TemperatureLast && t != 1 && f.Active(v)
}
