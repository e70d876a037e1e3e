package view

import (
	"strconv"
	"strings"

	"github.com/sampviz/sampviz/engine"
)

// The run page's rerun form: one field for every parameter of the
// parameter table (engine.ParamTable), the names `sampviz check` and the
// API take, so the web reaches every setting the command line does.

// RerunField is one field of the rerun form.
type RerunField struct {
	Name  string
	Label string
	// Usage is the parameter's one line of help; Rule its range.
	Usage string
	Rule  string
	// Value is what the run was given (empty: the dump's value, or the
	// default); Placeholder says what an empty field means.
	Value       string
	Placeholder string
	// Choices are a choice parameter's values (nil for a text field).
	Choices []Choice
	// TestID names the field for tests: rerun-NAME, dashes for
	// underscores.
	TestID string
}

// RerunGroup is a titled group of fields.
type RerunGroup struct {
	Title  string
	Fields []RerunField
}

// RerunGroups lays out the rerun form's fields by what they set: the
// sampling parameters, the filter chain, n-gram drafting, and how our
// backend runs.
func RerunGroups(p engine.Overrides) []RerunGroup {
	groups := []RerunGroup{{Title: "Sampling parameters of every row"}, {Title: "Filter chain and semantics"}, {Title: "N-gram drafting and padding"}, {Title: "How our backend runs"}}
	for _, param := range engine.ParamTable() {
		f := RerunField{Name: param.Name, Label: strings.ReplaceAll(param.Name, "_", " "), Usage: param.Usage, Rule: param.Rule,
			TestID: "rerun-" + strings.ReplaceAll(param.Name, "_", "-")}
		for _, c := range param.Choices {
			f.Choices = append(f.Choices, Choice{Value: c, Text: c})
		}
		if param.Name == "semantics" {
			f.Choices = SemanticsChoices()
		}
		f.Value, _ = p.Get(param.Name)
		f.Placeholder = rerunPlaceholder(param)
		g := 0
		switch {
		case param.Scope == engine.Work:
			g = 3
		case param.Scope == engine.RunWide && param.Kind == engine.KindChoice:
			g = 1
		case param.Scope == engine.RunWide:
			g = 2
		}
		groups[g].Fields = append(groups[g].Fields, f)
	}
	return groups
}

// rerunPlaceholder says what an empty field of param means.
func rerunPlaceholder(param *engine.Param) string {
	switch param.Name {
	case "op":
		return "the dump's op"
	case "method":
		return string(engine.SampleInverseCDF) + " (default)"
	case "draws":
		return strconv.Itoa(engine.DefaultDraws) + " on cpu, " + strconv.Itoa(engine.DefaultCountedDraws) + " on cuda (default)"
	case "trials":
		return strconv.Itoa(engine.DefaultTrials) + " (default)"
	case "semantics":
		return "none (the fields below)"
	}
	if param.Default != "" {
		return "from the dump (default " + param.Default + ")"
	}
	return "from the dump"
}

// ChoiceLabel writes an empty choice's option: what leaving it means.
func ChoiceLabel(f RerunField) string { return f.Placeholder }
