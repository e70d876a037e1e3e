package view

import (
	"strings"
	"testing"

	"github.com/sampviz/sampviz/engine/explain"
)

func TestTokenSpans(t *testing.T) {
	long := make([]int64, 400)
	for i := range long {
		long[i] = int64(i)
	}
	tests := []struct {
		name  string
		seq   []int64
		marks []markedRange
		want  string // spans as "text/class", joined by spaces
	}{
		{"short, no marks", []int64{5, 6, 7}, nil, "5/ 6/ 7/"},
		{"short with marks", []int64{5, 6, 7, 8}, []markedRange{{1, 2, "match"}, {2, 4, "draft"}}, "5/ 6/match 7/draft 8/draft"},
		{"long: edges and the match stay, the rest is elided", long, []markedRange{{200, 202, "match"}},
			"0/ 1/ 2/ 3/ 4/ 5/ 6/ 7/ 8/ 9/ 10/ 11/ … 172 tokens …/elided " +
				"184/ 185/ 186/ 187/ 188/ 189/ 190/ 191/ 192/ 193/ 194/ 195/ 196/ 197/ 198/ 199/ 200/match 201/match " +
				"202/ 203/ 204/ 205/ 206/ 207/ 208/ 209/ 210/ 211/ 212/ 213/ 214/ 215/ 216/ 217/ … 170 tokens …/elided " +
				"388/ 389/ 390/ 391/ 392/ 393/ 394/ 395/ 396/ 397/ 398/ 399/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range tokenSpans(tt.seq, nil, tt.marks...) {
				got = append(got, s.Text+"/"+s.Class)
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("spans\n got %s\nwant %s", g, tt.want)
			}
		})
	}
}

func TestNgramSentence(t *testing.T) {
	tests := []struct {
		name string
		n    explain.NgramDetail
		want []string
	}{
		{"match in the prompt", explain.NgramDetail{Prompt: []int64{1, 2, 3, 9}, Generated: []int64{5, 2, 3}, MaxNgram: 3, N: 2, Source: "prompt", Start: 1,
			Budget: 10, Limit: 4, MaxDraftTokens: 4, Reference: []int64{9}},
			[]string{"The last 2 generated tokens [2 3] (no longer n-gram, up to 3, occurs earlier) first occur in the prompt at position 1; the draft is the 1 token after them.", "min(max_draft_tokens 4, 10) = 4"}},
		{"budget spent", explain.NgramDetail{Generated: []int64{1}, MaxNgram: 3, Budget: 0, Limit: 0, MaxDraftTokens: 8},
			[]string{"came 0 draft tokens were left", "proposes nothing"}},
		{"no match", explain.NgramDetail{Prompt: []int64{1}, Generated: []int64{4, 5}, MaxNgram: 3, Budget: 5, Limit: 5, MaxDraftTokens: 8},
			[]string{"No n-gram of the last 2 down to 1 generated tokens occurs earlier"}},
		{"nothing generated", explain.NgramDetail{Prompt: []int64{1}, MaxNgram: 3, Budget: 5, Limit: 5, MaxDraftTokens: 8},
			[]string{"Nothing has been generated yet"}},
		{"FastDeploy: a match", explain.NgramDetail{Prompt: []int64{1, 2, 3, 9}, Generated: []int64{5, 2, 3}, MaxNgram: 3, N: 2, Source: "prompt", Start: 1,
			Budget: 6, Limit: 4, MaxDraftTokens: 4, Reference: []int64{9}, Semantics: "fastdeploy", Offset: 1, SeqLen: 2},
			[]string{"first occur in the prompt at position 1", "Under FastDeploy's rules (fastdeploy)", "keeps one token for every later active row: 6 were left", "written from column 1; seq_lens_this_time is 2."}},
		{"FastDeploy: threshold spent", explain.NgramDetail{Generated: []int64{5, 2}, MaxNgram: 3, Budget: 1, Limit: 1, MaxDraftTokens: 4,
			Semantics: "fastdeploy", Offset: 1, SeqLen: 1, Why: "the threshold is spent (sum with the reserved tokens reaches threshold - 1)"},
			[]string{"1 were left", "It proposes nothing: the threshold is spent"}},
		{"FastDeploy: an encoder row", explain.NgramDetail{MaxNgram: 3, MaxDraftTokens: 4, Semantics: "fastdeploy", SeqLen: 3, Why: "an encoder (prefill) row"},
			[]string{"this row proposes nothing: an encoder (prefill) row; seq_lens_this_time is 3."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NgramSentence(&tt.n, nil)
			for _, w := range tt.want {
				if !strings.Contains(s, w) {
					t.Errorf("%q does not say %q", s, w)
				}
			}
		})
	}
}

func TestDraftCells(t *testing.T) {
	tests := []struct {
		name      string
		got, want []int64
		cells     string
		verdict   string
	}{
		{"same", []int64{4, 5}, []int64{4, 5}, "4 5", "same as the reference"},
		{"one differs", []int64{4, 6}, []int64{4, 5}, "4 6!", "differs"},
		{"too short", []int64{4}, []int64{4, 5}, "4 (missing)!", "differs"},
		{"too long", []int64{4, 5, 7}, []int64{4, 5}, "4 5 7!", "differs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range DraftCells(tt.got, tt.want, nil) {
				s := c.Text
				if c.Diff {
					s += "!"
				}
				got = append(got, s)
			}
			if g := strings.Join(got, " "); g != tt.cells || DraftVerdict(tt.got, tt.want) != tt.verdict {
				t.Errorf("cells %q verdict %q, want %q and %q", g, DraftVerdict(tt.got, tt.want), tt.cells, tt.verdict)
			}
		})
	}
}
