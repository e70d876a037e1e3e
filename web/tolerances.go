package web

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/url"
	"strconv"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/web/view"
)

// The query parameters that carry tolerances in a URL, so a re-judged view
// is a link: strict atol and rtol, native atol and rtol, and the p-value.
var toleranceParams = [...]string{"satol", "srtol", "natol", "nrtol", "pvalue"}

// parseTolerances reads tolerances from a URL query. It returns nil when the
// query names none, and one sentence when it names some but not all, or a
// value that is not a number in range.
func parseTolerances(q url.Values) (*engine.Tolerances, error) {
	var v [len(toleranceParams)]float64
	given := 0
	for i, p := range toleranceParams {
		s := q.Get(p)
		if s == "" {
			continue
		}
		given++
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return nil, fmt.Errorf("%s must be a finite number >= 0, not %q", p, s)
		}
		v[i] = x
	}
	if given == 0 {
		return nil, nil
	}
	if given < len(toleranceParams) {
		return nil, fmt.Errorf("re-judging needs all of satol, srtol, natol, nrtol and pvalue; %d of them were given", given)
	}
	if v[4] <= 0 || v[4] >= 1 {
		return nil, fmt.Errorf("pvalue must be between 0 and 1, not %s", q.Get("pvalue"))
	}
	return &engine.Tolerances{
		Strict: engine.Tolerance{Atol: v[0], Rtol: v[1]},
		Native: engine.Tolerance{Atol: v[2], Rtol: v[3]},
		PValue: v[4],
	}, nil
}

// toleranceKey names the judgement of a set of tolerances: the same
// tolerances always give the same key, whatever order the URL wrote them in.
func toleranceKey(t engine.Tolerances) string {
	s := view.ToleranceValues(&t).Encode() // Encode sorts by key
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}
