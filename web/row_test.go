package web

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/explain"
	"github.com/sampviz/sampviz/web/view"
)

func TestRowNgramRenders(t *testing.T) {
	n := &explain.NgramDetail{
		Prompt: []int64{1, 2, 3, 9, 8}, Generated: []int64{7, 2, 3}, MaxNgram: 2, N: 2, Source: "prompt", Start: 1,
		Budget: 100, Limit: 2, MaxDraftTokens: 2, Reference: []int64{9, 8},
		Drafts: []explain.NamedDraft{{OutputInfo: engine.OutputInfo{Name: "draft_out", External: true}, Tokens: []int64{9, 7}}},
	}
	var b bytes.Buffer
	if err := rowNgram(n, nil).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		`data-testid="ngram-prompt"`,
		`<span class="tok match">2</span><span class="tok match">3</span><span class="tok draft">9</span><span class="tok draft">8</span>`,
		`<span class="tok pattern">2</span><span class="tok pattern">3</span>`,
		`<span class="tok diff">7</span>`,
		"differs",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("rendered row lacks %s", want)
		}
	}
}

// With a tokenizer's text, every token of the n-gram view shows it beside
// its id.
func TestRowNgramShowsText(t *testing.T) {
	n := &explain.NgramDetail{
		Prompt: []int64{1, 2, 3, 9, 8}, Generated: []int64{7, 2, 3}, MaxNgram: 2, N: 2, Source: "prompt", Start: 1,
		Budget: 100, Limit: 2, MaxDraftTokens: 2, Reference: []int64{9, 8},
		Drafts: []explain.NamedDraft{{OutputInfo: engine.OutputInfo{Name: "draft_out", External: true}, Tokens: []int64{9, 7}}},
	}
	names := view.Tokens{2: "␣for", 3: "␣i", 9: "␣in", 7: "↵"}
	var b bytes.Buffer
	if err := rowNgram(n, names).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		`<span class="tok match">2 ‹␣for›</span><span class="tok match">3 ‹␣i›</span><span class="tok draft">9 ‹␣in›</span><span class="tok draft">8</span>`,
		`<span class="tok diff">7 ‹↵›</span>`,
		`[2 ‹␣for› 3 ‹␣i›]`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("rendered row lacks %s", want)
		}
	}
}
