package view

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
)

// This file puts the statistical findings of a row into words for the row
// page: goodness of fit of many draws, speculative trials against the
// laws, and the laws themselves.

// FitLine says a row's goodness of fit in one line with its numbers.
func FitLine(f *engine.Fit) string {
	s := fmt.Sprintf("Goodness of fit of %d draws: %s test, statistic %s on %d degrees of freedom over %d bins, %s; total variation %s (a correct sampler stays under %s at this N); cosine similarity %s.",
		f.Draws, f.Test, engine.FormatSig(float64(f.Statistic), 4), f.DF, f.Bins, engine.StoredPText(float64(f.PValue)), engine.FormatSig(float64(f.TV), 4), engine.FormatSig(float64(f.TVBound), 4), engine.FormatSig(float64(f.Cosine), 4))
	if f.ZeroMassDraws > 0 {
		s += fmt.Sprintf(" %d draws landed on tokens the reference gives no mass.", f.ZeroMassDraws)
	}
	return s
}

// SpecStatsLine says a row's speculative statistics in one line.
func SpecStatsLine(s *engine.SpecStats) string {
	parts := []string{fmt.Sprintf("%d trials", s.Trials)}
	if s.MeanAcceptanceLength > 0 {
		parts = append(parts, fmt.Sprintf("mean acceptance length %s against %s in theory", engine.FormatSig(float64(s.MeanAcceptanceLength), 4), engine.FormatSig(float64(s.TheoryMeanAcceptanceLength), 4)))
	}
	if len(s.Emitted) > 0 {
		parts = append(parts, "emitted lengths against their exact law: "+engine.StoredPText(float64(s.EmittedPValue)))
	}
	var low []string
	for _, p := range s.Positions {
		low = append(low, fmt.Sprintf("%d: %d of %d (theory %s, %s)", p.Position, p.Accepted, p.Reached, engine.FormatSig(float64(p.Theory), 4), engine.StoredPText(float64(p.PValue))))
	}
	if len(low) > 0 {
		parts = append(parts, "accepted by position "+strings.Join(low, "; "))
	}
	if n := len(s.Lossless); n > 0 {
		worst := 0
		for j, f := range s.Lossless {
			if f.PValue < s.Lossless[worst].PValue {
				worst = j
			}
		}
		parts = append(parts, fmt.Sprintf("output tokens against exact speculative sampling at %d positions, smallest %s at position %d", n, engine.StoredPText(float64(s.Lossless[worst].PValue)), worst))
	}
	return "Speculative trials: " + strings.Join(parts, "; ") + "."
}

// LawRow is one line of a spec_verify row's table of laws.
type LawRow struct {
	Position, Draft, P, Q, Accept, Emitted string
}

// LawRows lists, per draft position, the draft, p and q of the draft, the
// acceptance probability, and the probability that the chain emits exactly
// that many drafts; the last line is the bonus position.
func LawRows(sd *explain.SpecDetail, names Tokens) []LawRow {
	var rows []LawRow
	for j := 0; j <= sd.K; j++ {
		r := LawRow{Position: strconv.Itoa(j)}
		if j < len(sd.Emitted) {
			r.Emitted = engine.FormatSig(float64(sd.Emitted[j]), 3)
		}
		if j == sd.K {
			r.Draft = "bonus"
			rows = append(rows, r)
			continue
		}
		if j < len(sd.Drafts) {
			r.Draft = names.Label(sd.Drafts[j])
		}
		if j < len(sd.Accept) {
			r.Accept = engine.FormatSig(float64(sd.Accept[j]), 3)
		}
		if j < len(sd.Positions) && j < len(sd.Drafts) {
			for _, t := range sd.Positions[j].Tokens {
				if int64(t.Token) == sd.Drafts[j] {
					r.P, r.Q = engine.FormatSig(float64(t.P), 3), engine.FormatSig(float64(t.Q), 3)
				}
			}
			if sd.Positions[j].Invalid != "" {
				r.P = "no distribution"
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// LawsLine says what the table of laws shows.
func LawsLine(sd *explain.SpecDetail) string {
	q := "the dump's draft probabilities q_i"
	if sd.OneHot {
		q = "one-hot drafts (the dump has no draft_probs, so q_i(x_i) = 1)"
	}
	return fmt.Sprintf("%d draft positions with %s. Position i accepts its draft with probability a_i = min(1, p_i(x_i)/q_i(x_i)); the chain emits j drafts with probability a_0···a_{j−1}(1 − a_j), and its mean acceptance length is %s.",
		sd.K, q, engine.FormatSig(float64(sd.MeanAcceptanceLength), 4))
}

// SamplesLine says how many draws each sampling output made of the row and
// how many fall outside the vocabulary.
func SamplesLine(d *explain.SampleDetail) string {
	var parts []string
	for i, o := range d.Outputs {
		p := fmt.Sprintf("%s drew this row %d times", o.Label(), d.Draws[i])
		if i < len(d.OutOfRange) && d.OutOfRange[i] > 0 {
			p += fmt.Sprintf(" (%d draws outside the vocabulary, in no bar)", d.OutOfRange[i])
		}
		if i < len(d.SameAsFirst) && d.SameAsFirst[i] {
			p += fmt.Sprintf(", draw for draw the same tokens as %s (the same seed and method draw the same tokens)", d.Outputs[0].Label())
		}
		parts = append(parts, p)
	}
	zero := 0
	for _, t := range d.Tokens {
		if t.Ref == 0 {
			zero++
		}
	}
	s := strings.Join(parts, "; ") + ". Grey bars are what the reference expects: draws × its probability."
	if zero > 0 {
		s += fmt.Sprintf(" %d tokens drawn have no reference mass: red, or amber where a filter boundary allows them.", zero)
	}
	return s
}
