package dump

import (
	"slices"

	"github.com/sampviz/sampviz/engine"
)

// modeNames checks the names of the tensors named after a mode
// (TENSOR@MODE, engine.SplitName) before anything else is read: each
// mode's characters, and at most engine.MaxNamedOutputs named outputs.
// Tensors outside the dump format are left to their notice.
func (b *builder) modeNames() error {
	outputs := 0
	for _, name := range b.names {
		base, mode := engine.SplitName(name)
		if !engine.HasMode(name) || !engine.KnownTensor(name) {
			continue
		}
		if why := engine.ModeProblem(mode); why != "" {
			return tensorError(b.file, name, "%s", why)
		}
		if engine.OutputSpec(base) != nil && !engine.Companion(base) {
			outputs++
			if outputs > engine.MaxNamedOutputs {
				return tensorError(b.file, name, "the dump holds more than %d named outputs, the most one dump may hold", engine.MaxNamedOutputs)
			}
		}
	}
	return nil
}

// named reports whether the dump holds the output base under some mode
// (base@MODE).
func (b *builder) named(base string) bool {
	for _, name := range b.names {
		if t, mode := engine.SplitName(name); mode != "" && t == base {
			return true
		}
	}
	return false
}

// outputs checks the external outputs the op judges (engine.OpSpec.Outputs),
// plain and named after a mode, and files them in run.External by their
// tensor names. Each output binds its own N (draws) and T (trials): modes
// may draw different numbers. Token values are not checked: out-of-range
// tokens are the judge's findings, not reading errors.
func (b *builder) outputs() error {
	primary := map[string]bool{} // the output tensors present, for companions
	for _, name := range b.names {
		primary[name] = true
	}
	for _, name := range b.names {
		base, mode := engine.SplitName(name)
		ts := engine.OutputSpec(base)
		if ts == nil || !b.spec.Judges(base) || ts.NamedOnly && mode == "" {
			continue
		}
		t := b.tensors[name]
		if engine.Companion(base) && mode != "" && !primary[withMode(ts.With, mode)] {
			b.notice("ignored tensor %q: no %s to go with it", name, withMode(ts.With, mode))
			continue
		}
		if with := engine.OutputSpec(ts.With); with != nil && with.TopN == base {
			if !primary[withMode(ts.With, mode)] {
				b.notice("ignored tensor %q: no %s to go with it", name, withMode(ts.With, mode))
			}
			continue // checked with the output it goes with
		}
		if handled, err := b.logprobsOutput(name, mode, t, ts); handled || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if err := b.wantDType(t, ts.Float); err != nil {
			return err
		}
		if d := b.dims["D"]; len(ts.Dims) == 2 && ts.Dims[1] == "D" && len(t.Shape) == 2 && t.Shape[0] == b.rows && t.Shape[1] != d {
			if b.run.Params.NgramSemantics.FastDeploy() {
				return tensorError(b.file, t.Name, "shape %s has %d columns, but FastDeploy's draft buffer has max_draft_tokens + 1 = %d (the current token, then the draft): set max_draft_tokens to %d in the metadata or with the override", t.ShapeString(), t.Shape[1], d, t.Shape[1]-1)
			}
			return tensorError(b.file, t.Name, "shape %s has %d columns, but max_draft_tokens is %d: set max_draft_tokens to %d in the metadata or with the override", t.ShapeString(), t.Shape[1], d, t.Shape[1])
		}
		delete(b.dims, "N")
		delete(b.dims, "T")
		if err := b.wantDims(t, ts.Dims); err != nil {
			return err
		}
		if d := b.run.DraftTrials; d != nil && base == "spec_trials" && t.Shape[0] != d.Shape[0] {
			return tensorError(b.file, t.Name, "shape %s holds %d trials, but draft_tokens %s holds drafts for %d: with drafts drawn per trial, every trial needs its own",
				t.ShapeString(), t.Shape[0], d.ShapeString(), d.Shape[0])
		}
		b.run.External[name] = t
	}
	return nil
}

// declared resolves the seeds and offsets that modes declare (seed@MODE,
// offset@MODE) into run.Declared, checked as the run's own seed and offset
// are: one value per row or one for all. A mode's missing offset is the
// run's. A declaration of a mode that names no output is a notice.
func (b *builder) declared() error {
	modes := map[string]bool{}
	for name := range b.run.External {
		if _, mode := engine.SplitName(name); mode != "" {
			modes[mode] = true
		}
	}
	for _, name := range b.names {
		base, mode := engine.SplitName(name)
		if mode == "" || !engine.Declares(base) || !b.spec.Uses(name) {
			continue
		}
		if !modes[mode] {
			b.notice("ignored tensor %q: no output is named %s", name, mode)
			continue
		}
		d := b.run.Declared[mode]
		if d == nil {
			d = &engine.DeclaredSeeds{Seed: slices.Clone(b.run.Params.Seed), Offset: slices.Clone(b.run.Params.Offset)}
			if b.run.Declared == nil {
				b.run.Declared = map[string]*engine.DeclaredSeeds{}
			}
			b.run.Declared[mode] = d
		}
		set := func(r int, o *engine.Overrides) { d.Seed[r] = *o.Seed }
		if base == "offset" {
			set = func(r int, o *engine.Overrides) { d.Offset[r] = *o.Offset }
		}
		if err := b.rowValues(b.tensors[name], engine.ParamByName(base), set); err != nil {
			return err
		}
	}
	return nil
}

// rowValues checks a per-row tensor t of parameter p (a scalar or one value
// per row) against the parameter table and hands each row's checked value
// to set.
func (b *builder) rowValues(t *engine.Tensor, p *engine.Param, set func(r int, o *engine.Overrides)) error {
	at, err := b.perRow(t, p)
	if err != nil {
		return err
	}
	if err := b.f.Load(t.Name); err != nil {
		return err
	}
	for r := range b.rows {
		var row engine.Overrides
		if err := row.Set(p.Name, valueText(t, at(r), p)); err != nil {
			if len(t.Shape) == 0 {
				return tensorError(b.file, t.Name, "%v", err)
			}
			return tensorError(b.file, t.Name, "row %d: %v", r, err)
		}
		set(r, &row)
	}
	return nil
}

// padding checks valid_rows against the batch.
func (b *builder) padding() error {
	if n := b.run.Params.ValidRows; n > b.rows {
		return fileError(b.file, "valid_rows is %d, more than the %d rows of %s", n, b.rows, b.ref.Name)
	}
	return nil
}
