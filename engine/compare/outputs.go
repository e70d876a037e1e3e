package compare

import (
	"slices"

	"github.com/sampviz/sampviz/engine"
)

// ExternalOutputs packages the external outputs found in a dump
// (run.External) as Outputs, in a fixed order: probs, tokens, samples,
// spec_tokens (with spec_emitted and spec_accepted of the same mode, which
// only make sense with it), spec_trials, tree_tokens (with tree_path and
// tree_accepted; or tree_path alone, which cannot be judged without it),
// tree_trials (with tree_path_trials, or that alone), draft_out, logits and
// logprobs (with logprob_token_ids of the same mode, and the mode's kind);
// of each, the output without a mode first, then the named ones by name.
// Each is named after its first tensor ("probs", "probs@eager") and carries
// the seeds its mode declares (run.Declared).
func ExternalOutputs(run *engine.Run) []*engine.Output {
	ext := run.External
	var outs []*engine.Output
	addName := func(name string, fill func(o *engine.Output, t *engine.Tensor, mode string)) {
		_, mode := engine.SplitName(name)
		o := &engine.Output{Name: name, External: true}
		if mode != "" {
			o.Declared = run.Declared[mode]
		}
		fill(o, ext[name], mode)
		outs = append(outs, o)
	}
	add := func(base string, fill func(o *engine.Output, t *engine.Tensor, mode string)) {
		for _, name := range namesOf(ext, base) {
			addName(name, fill)
		}
	}
	// addEither adds the outputs named after first, and after second where
	// their mode has no first.
	addEither := func(first, second string, fill func(o *engine.Output, t *engine.Tensor, mode string)) {
		add(first, fill)
		for _, name := range namesOf(ext, second) {
			if _, mode := engine.SplitName(name); ext[withMode(first, mode)] == nil {
				addName(name, fill)
			}
		}
	}
	add("probs", func(o *engine.Output, t *engine.Tensor, _ string) { o.Probs = t })
	add("tokens", func(o *engine.Output, t *engine.Tensor, _ string) { o.Tokens = t })
	add("samples", func(o *engine.Output, t *engine.Tensor, _ string) { o.Samples = t })
	add("sample_counts", func(o *engine.Output, t *engine.Tensor, _ string) { o.SampleCounts = t })
	add("spec_tokens", func(o *engine.Output, t *engine.Tensor, mode string) {
		o.SpecTokens, o.SpecEmitted, o.SpecAccepted = t, ext[withMode("spec_emitted", mode)], ext[withMode("spec_accepted", mode)]
	})
	add("spec_trials", func(o *engine.Output, t *engine.Tensor, _ string) { o.SpecTrials = t })
	addEither("tree_tokens", "tree_path", func(o *engine.Output, _ *engine.Tensor, mode string) {
		o.TreeTokens, o.TreePath, o.TreeAccepted = ext[withMode("tree_tokens", mode)], ext[withMode("tree_path", mode)], ext[withMode("tree_accepted", mode)]
	})
	addEither("tree_trials", "tree_path_trials", func(o *engine.Output, _ *engine.Tensor, mode string) {
		o.TreeTrials, o.TreePathTrials = ext[withMode("tree_trials", mode)], ext[withMode("tree_path_trials", mode)]
	})
	add("draft_out", func(o *engine.Output, t *engine.Tensor, mode string) {
		o.DraftOut, o.SeqLensThisTime = t, ext[withMode("seq_lens_this_time_out", mode)]
	})
	add("logits", func(o *engine.Output, t *engine.Tensor, _ string) { o.Logits = t })
	add("logprobs", func(o *engine.Output, t *engine.Tensor, mode string) {
		o.Logprobs, o.LogprobTokenIDs, o.LogprobsKind = t, ext[withMode("logprob_token_ids", mode)], run.LogprobsKindOf(mode)
	})
	return outs
}

// namesOf lists the tensors of ext that are the output base: base itself
// first, then base@MODE by mode.
func namesOf(ext map[string]*engine.Tensor, base string) []string {
	var named []string
	for name := range ext {
		if b, mode := engine.SplitName(name); b == base && mode != "" {
			named = append(named, name)
		}
	}
	slices.Sort(named)
	if ext[base] != nil {
		named = append([]string{base}, named...)
	}
	return named
}

// withMode names the tensor base of mode ("" for the plain one).
func withMode(base, mode string) string {
	if mode == "" {
		return base
	}
	return base + "@" + mode
}
