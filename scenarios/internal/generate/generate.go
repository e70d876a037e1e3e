// Package generate builds the scenario catalogue: for each scenario, its
// dump (inputs from fixed seeds, and the external outputs that small, honest
// simulations of real kernels produce from them) and its scenario.json (the
// verdict the design implies). `go run ./scenarios/gen` writes what it
// builds; the scenarios package's tests compare it with the committed files.
//
// Everything here is deterministic: the same code gives the same bytes. The
// expected verdicts come from each scenario's design (which rows were built
// to fail, and why), never from running the judge; where a design rests on
// a margin (a near-tie, a filter cut), the builder checks the margin and
// fails rather than write a scenario whose verdict would be luck.
//
// The package never writes files and never judges; the README.md of each
// folder is written by hand and left alone.
package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/dump"
	"github.com/sampviz/sampviz/scenarios"
)

// Folder is what one scenario folder holds besides its README.
type Folder struct {
	Config scenarios.Config
	// Dump is the safetensors dump, named Config.Dump.
	Dump []byte
	// ConfigJSON is scenarios.ConfigFile's content.
	ConfigJSON []byte
	// After is the after dump of a before/after pair, named
	// Config.Diff.After (nil for other scenarios).
	After []byte
}

// scenario is a builder's result before it is serialised.
type scenario struct {
	cfg     scenarios.Config
	tensors []*engine.Tensor
	meta    map[string]string
	// after are the after dump's tensors of a before/after pair
	// (cfg.Diff), written with the same metadata.
	after []*engine.Tensor
}

// builders lists every scenario in catalogue order.
var builders = []func() (*scenario, error){
	greedyBatch,
	mixedBatch,
	softmaxFP32,
	softmaxBF16,
	softmaxFP16,
	scaleBeforeMax,
	filterOrder,
	verifyProbs,
	specFullAcceptance,
	specCertainRejection,
	specPartialAcceptance,
	specCounters,
	specOneHotDrafts,
	treeChain,
	treeWide,
	treeDeep,
	treeSiblingBug,
	treeRelaxed,
	ngramDrafting,
	seededDeterminism,
	nanAndMaskedRows,
	oddVocabulary,
	graphVsEager,
	logitsGate,
	paddedBatch,
	kernelFixDiff,
	logprobsKinds,
	samplerDiagnoses,
	specRedrawnDrafts,
	fastDeployNgram,
	fastDeployHybrid,
}

// All builds every scenario, in catalogue order.
func All() ([]Folder, error) {
	var out []Folder
	for i, build := range builders {
		s, err := build()
		if err != nil {
			return nil, err
		}
		s.cfg.Order = i + 1
		f, err := s.folder()
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", s.cfg.Name, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// folder serialises s and checks that the dump loads as the op it declares.
func (s *scenario) folder() (Folder, error) {
	meta := maps.Clone(s.meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta["op"] = string(s.cfg.Op)
	meta["source"] = "sampviz scenario " + s.cfg.Name + " (go run ./scenarios/gen)"
	s.cfg.Dump = s.cfg.Name + ".safetensors"
	b, err := s.encode(s.cfg.Dump, s.tensors, meta)
	if err != nil {
		return Folder{}, err
	}
	var after []byte
	if s.cfg.Diff != nil {
		s.cfg.Diff.After = s.cfg.Name + "-after.safetensors"
		if after, err = s.encode(s.cfg.Diff.After, s.after, meta); err != nil {
			return Folder{}, err
		}
	}
	cfg, err := json.MarshalIndent(s.cfg, "", "  ")
	if err != nil {
		return Folder{}, fmt.Errorf("encode %s: %w", scenarios.ConfigFile, err)
	}
	return Folder{Config: s.cfg, Dump: b, ConfigJSON: append(cfg, '\n'), After: after}, nil
}

// encode writes tensors and meta as the dump called name and checks that it
// loads as the op s declares, without notices.
func (s *scenario) encode(name string, tensors []*engine.Tensor, meta map[string]string) ([]byte, error) {
	b, err := encodeDump(tensors, meta)
	if err != nil {
		return nil, err
	}
	f, err := dump.Parse(name, b)
	if err != nil {
		return nil, fmt.Errorf("parse %s back: %w", name, err)
	}
	run, err := dump.BuildRun(f, s.cfg.Overrides.Engine())
	if err != nil {
		return nil, fmt.Errorf("build the run of %s: %w", name, err)
	}
	if run.Op != s.cfg.Op {
		return nil, fmt.Errorf("%s loads as op %s, not %s", name, run.Op, s.cfg.Op)
	}
	if len(run.Notices) > 0 {
		return nil, fmt.Errorf("%s has notices: %q", name, run.Notices)
	}
	return b, nil
}

// encodeDump writes tensors and meta as safetensors.
func encodeDump(tensors []*engine.Tensor, meta map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	if err := dump.WriteSafetensors(&buf, tensors, meta); err != nil {
		return nil, fmt.Errorf("write dump: %w", err)
	}
	return buf.Bytes(), nil
}

// loadRun parses tensors and meta as a dump and builds its run with o.
func loadRun(name string, tensors []*engine.Tensor, meta map[string]string, o engine.Overrides) (*engine.Run, error) {
	b, err := encodeDump(tensors, meta)
	if err != nil {
		return nil, err
	}
	f, err := dump.Parse(name, b)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	run, err := dump.BuildRun(f, o)
	if err != nil {
		return nil, fmt.Errorf("build run of %s: %w", name, err)
	}
	return run, nil
}
