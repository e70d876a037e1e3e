package generate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/scenarios"
)

// ngramRow is one row of the n-gram scenario, in words.
type ngramRow struct {
	prompt, generated string
}

// ngramDrafting is prompt-lookup drafting on five rows with max_ngram_size
// 3, max_draft_tokens 4 and a budget (threshold) of 14 draft tokens for the
// whole batch:
//
//   - row 0: "the cat" occurs three times in the prompt; the leftmost
//     match proposes "sat on the mat";
//   - row 1: "went to the" occurs once;
//   - row 2: the last tokens occur only in the generated text, which is
//     searched after the prompt;
//   - row 3: "open the" occurs twice, and only 2 tokens of budget are left;
//   - row 4: matches, but the budget is spent, so it proposes nothing.
//
// The external draft_out comes from an implementation that takes the
// rightmost match (the most recent occurrence): it differs on rows 0 and 3.
func ngramDrafting() (*scenario, error) {
	const maxN, maxDraft, threshold = 3, 4, 14
	rows := []ngramRow{
		{"the cat sat on the mat . later the cat ate the fish . then the cat sat by the door .", "and so the cat"},
		{"we went to the market to buy bread and milk .", "yesterday we went to the"},
		{"lorem ipsum dolor sit amet .", "go left , then go left"},
		{"open the door , close the door , open the window .", "please open the"},
		{"one two three four five six seven", "four five"},
	}
	vocab := map[string]int64{}
	id := func(w string) int64 {
		if t, ok := vocab[w]; ok {
			return t
		}
		vocab[w] = int64(100 + len(vocab))
		return vocab[w]
	}
	var prompts, gens [][]int64
	width, genWidth := 0, 0
	for _, r := range rows {
		var p, g []int64
		for _, w := range strings.Fields(r.prompt) {
			p = append(p, id(w))
		}
		for _, w := range strings.Fields(r.generated) {
			g = append(g, id(w))
		}
		prompts, gens = append(prompts, p), append(gens, g)
		width, genWidth = max(width, len(p)), max(genWidth, len(g))
	}
	left := ngramDrafts(prompts, gens, maxN, maxDraft, threshold, leftmostMatch)
	right := ngramDrafts(prompts, gens, maxN, maxDraft, threshold, rightmostMatch)
	var failing []scenarios.RowRules
	for r := range rows {
		if !slices.Equal(left[r], right[r]) {
			failing = append(failing, fail(r, engine.RuleExact))
		}
	}
	if len(failing) != 2 || failing[0].Row != 0 || failing[1].Row != 3 {
		return nil, fmt.Errorf("ngram-drafting: the rightmost match differs on rows %v, want 0 and 3", failing)
	}
	var in, inLen, pre, step, out []int64
	for r := range rows {
		in = append(in, padded(prompts[r], width)...)
		inLen = append(inLen, int64(len(prompts[r])))
		pre = append(pre, padded(gens[r], genWidth)...)
		step = append(step, int64(len(gens[r])))
		out = append(out, right[r]...)
	}
	b := len(rows)
	return &scenario{
		cfg: scenarios.Config{
			Name:    "ngram-drafting",
			Title:   "N-gram drafting",
			Summary: "Prompt-lookup drafts from repeated phrases: the leftmost match wins, the prompt before the generated text, and a budget of 14 tokens shared by five rows.",
			Op:      engine.OpNgramMatch,
			View:    "/rows/0",
			Expect: scenarios.Expect{Pass: false, Outputs: []scenarios.OutputExpect{
				{Name: "cpu", Pass: true},
				{Name: "draft_out", Pass: false, Failing: failing},
			}},
		},
		tensors: []*engine.Tensor{
			i64("input_ids", []int{b, width}, in),
			i64("input_ids_len", []int{b}, inLen),
			i64("pre_ids", []int{b, genWidth}, pre),
			i64("step_idx", []int{b}, step),
			i64("draft_out", []int{b, maxDraft}, out),
		},
		meta: map[string]string{
			"max_ngram_size":   strconv.Itoa(maxN),
			"max_draft_tokens": strconv.Itoa(maxDraft),
			"threshold":        strconv.Itoa(threshold),
		},
	}, nil
}

// padded returns ids padded with 0 to width.
func padded(ids []int64, width int) []int64 {
	out := make([]int64, width)
	copy(out, ids)
	return out
}

// matcher returns the start of a match of pattern in seq with at least one
// token after it, or -1.
type matcher func(seq, pattern []int64) int

// leftmostMatch is the rule of docs/SEMANTICS.md: the least start.
func leftmostMatch(seq, pattern []int64) int {
	n := len(pattern)
	for s := 0; s+n < len(seq); s++ {
		if slices.Equal(seq[s:s+n], pattern) {
			return s
		}
	}
	return -1
}

// rightmostMatch is the most recent occurrence: the greatest start.
func rightmostMatch(seq, pattern []int64) int {
	n := len(pattern)
	for s := len(seq) - n - 1; s >= 0; s-- {
		if slices.Equal(seq[s:s+n], pattern) {
			return s
		}
	}
	return -1
}

// ngramDrafts drafts every row in order with the budget shared across the
// batch, matching with match: n from maxN down, the prompt before the
// generated tokens. Each draft is maxDraft wide, -1 filled.
func ngramDrafts(prompts, gens [][]int64, maxN, maxDraft, budget int, match matcher) [][]int64 {
	out := make([][]int64, len(prompts))
	for r := range prompts {
		draft := make([]int64, maxDraft)
		for j := range draft {
			draft[j] = -1
		}
		out[r] = draft
		limit := min(maxDraft, budget)
		gen := gens[r]
		if limit == 0 || len(gen) == 0 {
			continue
		}
	search:
		for n := min(maxN, len(gen)); n >= 1; n-- {
			pattern := gen[len(gen)-n:]
			for _, seq := range [][]int64{prompts[r], gen} {
				if s := match(seq, pattern); s >= 0 {
					got := seq[s+n : min(s+n+limit, len(seq))]
					copy(draft, got)
					budget -= len(got)
					break search
				}
			}
		}
	}
	return out
}
