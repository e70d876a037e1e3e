package dump

import (
	"slices"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// A logprobs output (docs/DUMPS.md "Logprobs") is the log probability of
// every token, logprobs [B, V], or a top-N: logprobs [B, N] with the N
// tokens they are of, logprob_token_ids [B, N], beside them under the same
// mode. Which of the two a dump holds is told by the ids' presence
// (engine.TensorSpec.TopN); both are checked here, when the dump is read, so
// that a top-N whose ids repeat or leave the vocabulary is refused in one
// sentence rather than judged.

// logprobsOutput checks the output tensor t called name (base, mode) when its
// spec has a top-N companion (engine.TensorSpec.TopN), and files it and its
// companion in run.External. It reports whether it handled t.
func (b *builder) logprobsOutput(name, mode string, t *engine.Tensor, ts *engine.TensorSpec) (bool, error) {
	if ts.TopN == "" {
		return false, nil
	}
	if err := b.wantDType(t, ts.Float); err != nil {
		return true, err
	}
	rows, v := b.rows, b.dims["V"]
	idsName := withMode(ts.TopN, mode)
	ids := b.tensors[idsName]
	if ids == nil || !b.spec.Judges(ts.TopN) {
		if len(t.Shape) == 2 && t.Shape[0] == rows && t.Shape[1] == v {
			b.run.External[name] = t
			return true, nil
		}
		if len(t.Shape) == 2 && t.Shape[0] == rows {
			return true, tensorError(b.file, name, "shape %s is neither [%d, %d], every token's log probability ([B, V] of %s), nor a top-N, whose token ids must be beside it as %s %s",
				t.ShapeString(), rows, v, b.boundBy["V"], idsName, t.ShapeString())
		}
		return true, tensorError(b.file, name, "shape %s fits neither [%d, %d] ([B, V] of %s) nor a top-N [%d, N] with %s beside it",
			t.ShapeString(), rows, v, b.boundBy["V"], rows, idsName)
	}
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] < 1 || t.Shape[1] > v {
		return true, tensorError(b.file, name, "shape %s is not a top-N beside %s: want [%d, N] with N in [1, %d] (B and V of %s)",
			t.ShapeString(), idsName, rows, v, b.boundBy["V"])
	}
	if err := b.wantDType(ids, false); err != nil {
		return true, err
	}
	if !slices.Equal(ids.Shape, t.Shape) {
		return true, tensorError(b.file, idsName, "shape %s does not fit %s %s: a top-N holds one token id per log probability", ids.ShapeString(), name, t.ShapeString())
	}
	if err := b.topTokens(ids); err != nil {
		return true, err
	}
	b.run.External[name], b.run.External[idsName] = t, ids
	return true, nil
}

// topTokens checks a top-N's token ids ("top_tokens" in the op table): in
// every real row, each id inside the vocabulary and none twice. Padded rows
// are not read: a padded lane holds whatever the launch left there.
func (b *builder) topTokens(ids *engine.Tensor) error {
	if err := b.f.Load(ids.Name); err != nil {
		return err
	}
	v, n := b.dims["V"], ids.Dim(1)
	at := make([]int32, v) // 1 + the position of each id in the current row, or 0
	for r := range b.rows {
		if b.run.Padding(r) {
			continue
		}
		for k := range n {
			tok := ids.Int(r*n + k)
			if tok < 0 || tok >= int64(v) {
				return tensorError(b.file, ids.Name, "row %d, position %d holds token %d, outside the vocabulary [0, %d) of %s", r, k, tok, v, b.boundBy["V"])
			}
			if p := at[tok]; p > 0 {
				return tensorError(b.file, ids.Name, "row %d holds token %d at positions %d and %d, but a top-N names each token once", r, tok, p-1, k)
			}
			at[tok] = int32(k + 1)
		}
		for k := range n {
			at[ids.Int(r*n+k)] = 0
		}
	}
	return nil
}

// logprobsKindPrefix begins the metadata key that declares one mode's
// logprobs kind: logprobs_kind@MODE.
const logprobsKindPrefix = "logprobs_kind@"

// logprobsKinds resolves the kinds that modes declare for their logprobs
// (the metadata key logprobs_kind@MODE) into run.LogprobsKinds, each checked
// as logprobs_kind is. An override of logprobs_kind applies to every output,
// so it leaves them out; a key of a mode without logprobs is a notice.
func (b *builder) logprobsKinds() error {
	var keys []string
	for k := range b.run.Meta {
		if strings.HasPrefix(k, logprobsKindPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		mode := strings.TrimPrefix(key, logprobsKindPrefix)
		if why := engine.ModeProblem(mode); why != "" {
			return fileError(b.file, "metadata %q: %s", key, why)
		}
		var o engine.Overrides
		if err := o.Set("logprobs_kind", b.run.Meta[key]); err != nil {
			return fileError(b.file, "metadata %q: %v", key, err)
		}
		switch {
		case b.o.LogprobsKind != nil:
		case b.run.External[withMode("logprobs", mode)] == nil:
			b.notice("ignored metadata %q: no output is named logprobs@%s", key, mode)
		default:
			if b.run.LogprobsKinds == nil {
				b.run.LogprobsKinds = map[string]engine.LogprobsKind{}
			}
			b.run.LogprobsKinds[mode] = *o.LogprobsKind
		}
	}
	return nil
}

// withMode names the tensor base of mode ("" for the plain one).
func withMode(base, mode string) string {
	if mode == "" {
		return base
	}
	return base + "@" + mode
}
