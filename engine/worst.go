package engine

import "math"

// WorstAt returns the row and token of the greatest |error| among rows
// against the reference that pick selects (a row's Strict or Native): the
// first NaN, else the first greatest value; -1, -1 when no row has that
// drift. It reads the rows themselves, so the place is a real row and
// token whichever rows were left out (NaN inputs, masked rows, padding).
func WorstAt(rows []RowReport, pick func(*RowReport) *Drift) (row, token int) {
	row, token = -1, -1
	best := math.Inf(-1)
	for i := range rows {
		d := pick(&rows[i])
		if d == nil {
			continue
		}
		if row >= 0 && math.IsNaN(best) {
			break
		}
		v := float64(d.Abs.Max)
		if row < 0 || math.IsNaN(v) || v > best {
			row, token, best = rows[i].Row, d.Abs.Index, v
		}
	}
	return row, token
}
