// Package lesson is the teaching mode: it steps through speculative
// sampling on one real row of a spec_verify dump, accept or reject at a
// time, with the CPU twin's own pieces (engine/cpu: the exact weights, the
// filters, the verify chain and the inverse CDF over the Philox streams), so
// what it shows is what the kernels do, on any machine; and through one
// verification of a spec_tree_verify row's draft tree, node by node and
// sibling by sibling, with the residual each rejection leaves (tree.go);
// and through one draw of a sample row by the inverse CDF, the sort-free
// rejection sampler or the Gumbel-max race (sample.go). A lesson's whole
// state is its URL: the same lesson gives the same steps.
//
// It steps the CPU twin rather than a Backend because a Backend runs whole
// launches: a lesson needs one accept/reject decision (or one rejection
// round) at a time, with its numbers. Its tests check that every lesson
// ends where the backend's launch does, and the session puts our kernels'
// stored draw beside a sampler lesson's. It never judges and never formats
// for a page.
package lesson

import "github.com/sampviz/sampviz/engine"

// Lesson is the state of the teaching mode, all of it in the URL: which
// position of the row, the controls, and how many steps have been taken.
// Nil controls take the row's own values.
type Lesson struct {
	// Position is the draft position whose target logits are taught on
	// (0..K-1).
	Position    int
	Temperature *float64
	TopK        *int
	TopP        *float64
	// Distance d moves the draft: q_d = normalise((1 - d)·p + d·q_row), for
	// d in [0, 1]; 0 is the target itself, 1 the row's real draft.
	Distance float64
	// Seed seeds the Philox streams of the steps (nil: the row's seed).
	Seed *uint64
	// Steps is how many accept/reject steps have been taken.
	Steps int
}

// Override sets the parameters the lesson overrides (temperature, top-k,
// top-p, seed) in st; the rest of st is the row's.
func (l Lesson) Override(st *State) {
	if l.Temperature != nil {
		st.Temperature = *l.Temperature
	}
	if l.TopK != nil {
		st.TopK = *l.TopK
	}
	if l.TopP != nil {
		st.TopP = *l.TopP
	}
	if l.Seed != nil {
		st.Seed = *l.Seed
	}
}

// MaxSteps bounds Lesson.Steps: the steps are recomputed from the
// first on every request, which at this many stays in the milliseconds.
const MaxSteps = 20000

// State is what Teach computed for a lesson: the target p and the
// draft q on the tokens worth drawing, the histogram of emitted tokens so
// far, the last steps, and the running total variation.
type State struct {
	Row      int `json:"row"`
	Position int `json:"position"`
	// K is the row's number of draft positions, Vocab its vocabulary.
	K     int `json:"k"`
	Vocab int `json:"vocab"`
	// The controls in force, with the row's values where the lesson gave none.
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	// MinP is the row's min-p, which the lesson keeps.
	MinP     float64 `json:"min_p"`
	Distance float64 `json:"distance"`
	Seed     uint64  `json:"seed"`
	Steps    int     `json:"steps"`
	// Draft is the row's real draft token at Position; OneHot says the dump
	// has no draft_probs, so the row's draft is one-hot there.
	Draft  int  `json:"draft"`
	OneHot bool `json:"one_hot"`
	// Invalid says why nothing can be taught here (the target or the draft
	// has no distribution); the rest is then empty.
	Invalid string `json:"invalid,omitempty"`
	// Beta is the probability that a step accepts its draft, Σ min(p, q);
	// TV is the total variation between p and q, 1 - Beta; TVBars is the
	// total variation between p and q over the histogram's bars (Tokens and
	// Other), where the drafts' running total variation settles.
	Beta   engine.Float `json:"beta"`
	TV     engine.Float `json:"tv"`
	TVBars engine.Float `json:"tv_bars"`
	// Tokens are the histogram's bars: the most probable tokens under p,
	// then those under q, with their counts; Other pools the rest. Their P
	// and Q are normalised to sum to 1.
	Tokens []Token `json:"tokens"`
	Other  Token   `json:"other"`
	// Accepted and Resampled count the steps that emitted their draft and
	// those that emitted a token drawn from the residual.
	Accepted  int `json:"accepted"`
	Resampled int `json:"resampled"`
	// Last holds the last few steps, oldest first.
	Last []Step `json:"last"`
	// Running is the total variation from p over the histogram's bars of
	// the emitted tokens, and of the drafts, after a growing number of
	// steps.
	Running []TVPoint `json:"running"`
	// Text is the visible text of the token ids above, when the run has a
	// tokenizer (NameTokens).
	Text map[int64]string `json:"text,omitempty"`
}

// Token is one token (or, with Token -1, the pooled rest) of a lesson.
type Token struct {
	Token int `json:"token"`
	// P and Q are the target and the draft probability.
	P engine.Float `json:"p"`
	Q engine.Float `json:"q"`
	// Drafted counts the steps that proposed it; Accepted those that emitted
	// it as an accepted draft, Resampled those that emitted it from the
	// residual.
	Drafted   int `json:"drafted"`
	Accepted  int `json:"accepted"`
	Resampled int `json:"resampled"`
}

// Step is one accept/reject step of a lesson.
type Step struct {
	// Step counts from 1.
	Step  int `json:"step"`
	Draft int `json:"draft"`
	// U is the uniform of the test u·q(x) < p(x); P and Q are p(x) and q(x)
	// of the draft, in the kernel's float32.
	U        engine.Float `json:"u"`
	P        engine.Float `json:"p"`
	Q        engine.Float `json:"q"`
	Accepted bool         `json:"accepted"`
	// Token is the token emitted: the draft, or the residual's draw.
	Token int `json:"token"`
}

// TVPoint is the total variation from p over a lesson's bars after Steps
// steps: of the emitted tokens, and of the drafts (what emitting every draft
// unverified gives).
type TVPoint struct {
	Steps   int          `json:"steps"`
	Emitted engine.Float `json:"emitted"`
	Drafts  engine.Float `json:"drafts"`
}

// Error is a lesson Teach, TeachTree or TeachSample cannot give: a run of
// another op, or a row, position, draw or control out of range. Its
// message is one sentence for the person who asked.
type Error struct {
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// NameTokens fills st.Text with the visible text of every token id the
// lesson shows (name gives it, false for an id it does not define).
func (st *State) NameTokens(name func(id int64) (string, bool)) {
	if name == nil {
		return
	}
	text := map[int64]string{}
	add := func(id int) {
		if id < 0 {
			return
		}
		if s, ok := name(int64(id)); ok {
			text[int64(id)] = s
		}
	}
	add(st.Draft)
	for _, t := range st.Tokens {
		add(t.Token)
	}
	for _, s := range st.Last {
		add(s.Draft)
		add(s.Token)
	}
	if len(text) > 0 {
		st.Text = text
	}
}
