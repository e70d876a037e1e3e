package view

import (
	"net/url"

	"github.com/sampviz/sampviz/engine"
)

// The URLs the pages link to keep their state in the query: the
// tolerances of a re-judged view, the row page's scale and top.

// ToleranceValues returns t as URL query values (nil for nil).
func ToleranceValues(t *engine.Tolerances) url.Values {
	if t == nil {
		return nil
	}
	return url.Values{
		"satol":  {engine.FormatFloat(t.Strict.Atol)},
		"srtol":  {engine.FormatFloat(t.Strict.Rtol)},
		"natol":  {engine.FormatFloat(t.Native.Atol)},
		"nrtol":  {engine.FormatFloat(t.Native.Rtol)},
		"pvalue": {engine.FormatFloat(t.PValue)},
	}
}

// WithQuery appends a query to path ("" when q is empty).
func WithQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
