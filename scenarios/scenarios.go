package scenarios

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"sync"

	"github.com/sampviz/sampviz/engine"
)

// catalogue holds every scenario folder: its config, README and dump,
// embedded in the binary (embed.go), or read from a folder in a build for
// the GPU machine (external.go).
var catalogue fs.ReadFileFS = embedded

// ConfigFile and ReadmeFile are the names of a scenario folder's config and
// README; the dump is named by Config.Dump.
const (
	ConfigFile = "scenario.json"
	ReadmeFile = "README.md"
)

// Config is a scenario's scenario.json: what it is, how it runs and the
// verdict it must produce.
type Config struct {
	// Order places the scenario in the catalogue (ascending).
	Order int `json:"order"`
	// Name is the folder's name, used in URLs and on the command line.
	Name string `json:"name"`
	// Title and Summary say what it shows, in one line each.
	Title   string `json:"title"`
	Summary string `json:"summary"`
	// Op is the op the dump's metadata declares.
	Op engine.Op `json:"op"`
	// Dump is the dump's file name inside the folder.
	Dump string `json:"dump"`
	// Overrides are what `sampviz check` is given beside the dump (many
	// draws or trials for the statistical checks). The verdict is the same
	// with and without them.
	Overrides Overrides `json:"overrides,omitzero"`
	// View is what follows /runs/{id} in the URL that shows the scenario's
	// point ("/rows/3", "?out=1&failing=1"); "" is the run page.
	View string `json:"view"`
	// Expect is the verdict the CPU backend and engine/compare must give.
	Expect Expect `json:"expect"`
	// Generator names what wrote the dump when it is not this repository's
	// Go generator (scenarios/internal/generate): a script run elsewhere,
	// whose output is committed as it came ("python/real_model_scenarios.py"
	// on the GPU machine). Such a dump is checked by its verdict, not
	// regenerated.
	Generator string `json:"generator,omitempty"`
	// Determinism, when set, says which external outputs record our
	// backend's draws for the dump's seeds, and a seed that must draw
	// differently.
	Determinism *Determinism `json:"determinism,omitempty"`
	// Diff, when set, makes the scenario a before/after pair for `sampviz
	// diff`: the dump is the before, Diff.After the after.
	Diff *DiffExpect `json:"diff,omitempty"`
}

// DiffExpect is what `sampviz diff` must say of a before/after pair.
type DiffExpect struct {
	// After is the after dump's file name, in the scenario's folder.
	After string `json:"after"`
	// Worse says whether something got worse (exit status 1).
	Worse bool `json:"worse"`
	// Output names the output whose rows change; Fixed and Broken list
	// exactly the rows that go from fail to pass and from pass to fail.
	Output string `json:"output"`
	Fixed  []int  `json:"fixed"`
	Broken []int  `json:"broken"`
}

// Overrides are the engine overrides a scenario runs with.
type Overrides struct {
	// Draws is the number of independent draws per row of a sample run.
	Draws *int `json:"draws,omitempty"`
	// Trials is the number of speculative trials per row of a spec_verify run.
	Trials *int `json:"trials,omitempty"`
}

// Empty reports whether o overrides nothing.
func (o Overrides) Empty() bool { return o.Draws == nil && o.Trials == nil }

// Engine returns o as engine overrides.
func (o Overrides) Engine() engine.Overrides {
	return engine.Overrides{Draws: o.Draws, Trials: o.Trials}
}

// Flags returns o as `sampviz check` flags ("--draws", "400").
func (o Overrides) Flags() []string {
	var f []string
	if o.Draws != nil {
		f = append(f, "--draws", strconv.Itoa(*o.Draws))
	}
	if o.Trials != nil {
		f = append(f, "--trials", strconv.Itoa(*o.Trials))
	}
	return f
}

// Expect is the verdict of a run: overall, and per output in the order
// engine/compare reports them (ours first, then the dump's external
// outputs in compare.ExternalOutputs' order).
type Expect struct {
	Pass    bool           `json:"pass"`
	Outputs []OutputExpect `json:"outputs"`
}

// OutputExpect is the verdict on one output.
type OutputExpect struct {
	// Name is "cpu" for our backend's output, the tensor name for an
	// external one.
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Failing lists exactly the rows that fail, each with exactly the rules
	// of its violations.
	Failing []RowRules `json:"failing,omitempty"`
	// Notes lists, for each rule named, exactly the rows that carry a note
	// of that rule (rules not named are not checked).
	Notes []RuleRows `json:"notes,omitempty"`
	// Matched lists, for each reference named, exactly the rows that passed
	// against it (probability outputs).
	Matched *Matched `json:"matched,omitempty"`
	// Diagnosed lists, for each class of sampler bug, exactly the rows
	// diagnosed with it (docs/SEMANTICS.md "Diagnoses"); a row of a class
	// not listed is a mismatch, so an output without the field must have
	// no diagnosed row at all.
	Diagnosed []ClassRows `json:"diagnosed,omitempty"`
}

// ClassRows is one class of sampler bug and the rows diagnosed with it,
// ascending.
type ClassRows struct {
	Class string `json:"class"`
	Rows  []int  `json:"rows"`
}

// RowRules is one failing row and the rules it breaks, sorted.
type RowRules struct {
	Row   int           `json:"row"`
	Rules []engine.Rule `json:"rules"`
}

// RuleRows is one rule and the rows it is noted on, ascending.
type RuleRows struct {
	Rule engine.Rule `json:"rule"`
	Rows []int       `json:"rows"`
}

// Matched lists the rows that matched each reference, ascending.
type Matched struct {
	Strict []int `json:"strict"`
	Native []int `json:"native"`
}

// Determinism is the seeded-determinism check of a sample scenario.
type Determinism struct {
	// Recorded names the external outputs ("tokens", "samples") that hold
	// what our backend draws for the dump's seeds and the config's
	// overrides: our output must equal them exactly.
	Recorded []string `json:"recorded"`
	// OtherSeed is a seed for every row that must draw differently.
	OtherSeed uint64 `json:"other_seed"`
}

// Scenario is one entry of the catalogue.
type Scenario struct {
	Config
	// README is the folder's README.md: what to look at, and why it matters.
	README string
}

// FileName returns the dump's file name ("greedy-batch.safetensors").
func (s Scenario) FileName() string { return s.Dump }

// Open opens the embedded dump for reading.
func (s Scenario) Open() (fs.File, error) {
	f, err := catalogue.Open(path.Join(s.Name, s.Dump))
	if err != nil {
		return nil, fmt.Errorf("open scenario %s: %w", s.Name, err)
	}
	return f, nil
}

// DumpBytes returns a copy of the embedded dump.
func (s Scenario) DumpBytes() ([]byte, error) {
	b, err := catalogue.ReadFile(path.Join(s.Name, s.Dump))
	if err != nil {
		return nil, fmt.Errorf("read scenario %s: %w", s.Name, err)
	}
	return b, nil
}

// OpenAfter opens the embedded after dump of a before/after pair
// (Config.Diff) for reading.
func (s Scenario) OpenAfter() (fs.File, error) {
	if s.Diff == nil {
		return nil, fmt.Errorf("scenario %s is no before/after pair", s.Name)
	}
	f, err := catalogue.Open(path.Join(s.Name, s.Diff.After))
	if err != nil {
		return nil, fmt.Errorf("open scenario %s: %w", s.Name, err)
	}
	return f, nil
}

// AfterBytes returns a copy of the embedded after dump of a before/after
// pair (Config.Diff).
func (s Scenario) AfterBytes() ([]byte, error) {
	if s.Diff == nil {
		return nil, fmt.Errorf("scenario %s is no before/after pair", s.Name)
	}
	b, err := catalogue.ReadFile(path.Join(s.Name, s.Diff.After))
	if err != nil {
		return nil, fmt.Errorf("read scenario %s: %w", s.Name, err)
	}
	return b, nil
}

// load reads every embedded scenario, ordered by Config.Order.
func load() ([]Scenario, error) {
	configs, err := fs.Glob(catalogue, "*/"+ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("list scenarios: %w", err)
	}
	var out []Scenario
	for _, name := range configs {
		dir := path.Dir(name)
		b, err := catalogue.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		var c Config
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		if c.Name != dir {
			return nil, fmt.Errorf("%s: name %q differs from its folder", name, c.Name)
		}
		readme, err := catalogue.ReadFile(path.Join(dir, ReadmeFile))
		if err != nil {
			return nil, fmt.Errorf("read README of scenario %s: %w", dir, err)
		}
		if _, err := fs.Stat(catalogue, path.Join(dir, c.Dump)); err != nil {
			return nil, fmt.Errorf("scenario %s: dump %q: %w", dir, c.Dump, err)
		}
		if c.Diff != nil {
			if _, err := fs.Stat(catalogue, path.Join(dir, c.Diff.After)); err != nil {
				return nil, fmt.Errorf("scenario %s: after dump %q: %w", dir, c.Diff.After, err)
			}
		}
		out = append(out, Scenario{Config: c, README: string(readme)})
	}
	slices.SortStableFunc(out, func(a, b Scenario) int { return a.Order - b.Order })
	return out, nil
}

var loaded = sync.OnceValues(load)

// Catalogue returns every built-in scenario in catalogue order. The
// catalogue is compiled into the binary and checked by this package's
// tests, so a folder that does not load is a broken build: Catalogue
// panics on it rather than serve a partial list.
func Catalogue() []Scenario {
	s, err := loaded()
	if err != nil {
		panic("scenarios: " + err.Error())
	}
	return slices.Clone(s)
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Catalogue() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}
