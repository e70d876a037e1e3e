package tokens

import (
	"strings"
	"testing"
)

// gpt2 is a byte-level BPE tokenizer.json as GPT-2's: Ġ is a space, Ċ a
// newline, and bytes outside printable Latin-1 map to code points from 256.
const gpt2 = `{
  "version": "1.0",
  "added_tokens": [{"id": 6, "content": "<|endoftext|>", "special": true}],
  "model": {"type": "BPE", "vocab": {"Ġthe": 0, "Ċ": 1, "hello": 2, "Ġ": 3, "ĉ": 4, "Ã©": 5}, "merges": []},
  "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true}
}`

// llama is a SentencePiece-style tokenizer.json: ▁ is a space and bytes
// fall back to <0xNN>.
const llama = `{
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}],
  "model": {"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0, "<s>": 1, "<0x0A>": 2, "<0x07>": 3, "▁the": 4, "▁": 5, "ing": 6, "<0xE2>": 7}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
}`

const metaspace = `{"model": {"type": "Unigram", "vocab": [["<pad>", 0], ["▁Hello", -3.2], ["world", -4.1]]},
  "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}}`

const wordpiece = `{"added_tokens": [{"id": 0, "content": "[CLS]", "special": true}],
  "model": {"type": "WordPiece", "continuing_subword_prefix": "##", "vocab": {"[CLS]": 0, "play": 1, "##ing": 2}},
  "decoder": {"type": "WordPiece", "prefix": "##"}}`

func TestShow(t *testing.T) {
	tests := []struct {
		name string
		json string
		want map[int64]string
	}{
		{"byte-level BPE", gpt2, map[int64]string{0: "␣the", 1: "↵", 2: "hello", 3: "␣", 4: "⇥", 5: "é", 6: "<|endoftext|>", 7: "#7", -1: "#-1"}},
		{"byte fallback and Replace", llama, map[int64]string{0: "<unk>", 1: "<s>", 2: "↵", 3: `\x07`, 4: "␣the", 5: "␣", 6: "ing", 7: `\xe2`}},
		{"Metaspace Unigram", metaspace, map[int64]string{1: "␣Hello", 2: "world"}},
		{"WordPiece", wordpiece, map[int64]string{0: "[CLS]", 1: "␣play", 2: "ing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := Parse([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			for id, want := range tt.want {
				if got := tok.Show(id); got != want {
					t.Errorf("Show(%d) = %q, want %q", id, got, want)
				}
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"not JSON", `{"model": `, "not a tokenizer.json"},
		{"unknown model", `{"model": {"type": "Magic", "vocab": {}}}`, `model type "Magic"`},
		{"vocab of the wrong kind", `{"model": {"type": "BPE", "vocab": [["a", 1]]}}`, "must map tokens to ids"},
		{"unigram vocab of the wrong kind", `{"model": {"type": "Unigram", "vocab": {"a": 1}}}`, "list of [piece, score] pairs"},
		{"id past any vocabulary", `{"model": {"type": "BPE", "vocab": {"a": 99999999}}}`, "outside [0, 2097152)"},
		{"negative id", `{"model": {"type": "BPE", "vocab": {"a": -2}}}`, "token id -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestMissingAndNil(t *testing.T) {
	tok, err := Parse([]byte(gpt2))
	if err != nil {
		t.Fatal(err)
	}
	if n, first := tok.Missing(10); n != 3 || len(first) != 3 || first[0] != 7 {
		t.Errorf("Missing(10) = %d %v, want 3 from id 7", n, first)
	}
	var none *Tokenizer
	if got := none.Show(42); got != "#42" {
		t.Errorf("a nil tokenizer shows %q, want #42", got)
	}
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{"a b": "a␣b", "\r": `\x0d`, "": "∅", "\x00": `\x00`, "\u200b": `\u200b`, "\xff": `\xff`} {
		if got := Visible([]byte(in)); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}
