package compare

import "github.com/sampviz/sampviz/engine"

// ExternalOutputs packages the external outputs found in a dump
// (run.External) as Outputs, in a fixed order: probs, tokens, samples,
// spec_tokens (with spec_emitted and spec_accepted, which only make sense
// with it), spec_trials, tree_tokens (with tree_path and tree_accepted; or
// tree_path alone, which cannot be judged without it), tree_trials (with
// tree_path_trials, or that alone) and draft_out. Each is named after its
// first tensor.
func ExternalOutputs(run *engine.Run) []*engine.Output {
	ext := run.External
	var outs []*engine.Output
	add := func(name string, fill func(o *engine.Output, t *engine.Tensor)) {
		if t := ext[name]; t != nil {
			o := &engine.Output{Name: name, External: true}
			fill(o, t)
			outs = append(outs, o)
		}
	}
	add("probs", func(o *engine.Output, t *engine.Tensor) { o.Probs = t })
	add("tokens", func(o *engine.Output, t *engine.Tensor) { o.Tokens = t })
	add("samples", func(o *engine.Output, t *engine.Tensor) { o.Samples = t })
	add("spec_tokens", func(o *engine.Output, t *engine.Tensor) {
		o.SpecTokens, o.SpecEmitted, o.SpecAccepted = t, ext["spec_emitted"], ext["spec_accepted"]
	})
	add("spec_trials", func(o *engine.Output, t *engine.Tensor) { o.SpecTrials = t })
	tree := func(o *engine.Output, _ *engine.Tensor) {
		o.TreeTokens, o.TreePath, o.TreeAccepted = ext["tree_tokens"], ext["tree_path"], ext["tree_accepted"]
	}
	trials := func(o *engine.Output, _ *engine.Tensor) {
		o.TreeTrials, o.TreePathTrials = ext["tree_trials"], ext["tree_path_trials"]
	}
	if ext["tree_tokens"] != nil {
		add("tree_tokens", tree)
	} else {
		add("tree_path", tree)
	}
	if ext["tree_trials"] != nil {
		add("tree_trials", trials)
	} else {
		add("tree_path_trials", trials)
	}
	add("draft_out", func(o *engine.Output, t *engine.Tensor) { o.DraftOut = t })
	return outs
}
