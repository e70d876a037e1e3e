// Package tokens turns token ids into the text they stand for, so that every
// chart, table and report can show `␣the` beside #6639. It reads a Hugging
// Face tokenizer.json (the format of the `tokenizers` library) for decoding
// only: the model's vocabulary (BPE, WordPiece, WordLevel or Unigram), the
// added tokens, and the decoder's rules for one token (ByteLevel's byte
// alphabet, Metaspace's ▁, ByteFallback's <0xNN>, WordPiece's ##, Replace).
//
// It never encodes text, never normalises, and never runs anything a file
// names: a tokenizer.json is data. A token is shown on its own, without the
// context a full decode would use (no strip of a leading space at the start
// of a sequence), and what cannot be printed is made visible (Show).
package tokens

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenizer holds the text of every token id a tokenizer.json defines.
type Tokenizer struct {
	// text[id] is the token's bytes after the decoder's rules; known[id]
	// says whether the file defines the id.
	text  [][]byte
	known []bool
	// Special marks the added tokens the file calls special (shown as they
	// are written, "<|endoftext|>").
	special []bool
}

// maxID bounds the ids a tokenizer.json may define: eight times the largest
// real vocabulary (about 260k), low enough that a forged id cannot take
// much memory.
const maxID = 1 << 21

// file is the part of tokenizer.json this package reads.
type file struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Model struct {
		Type         string          `json:"type"`
		Vocab        json.RawMessage `json:"vocab"`
		ByteFallback bool            `json:"byte_fallback"`
		// ContinuingSubwordPrefix is WordPiece's "##".
		ContinuingSubwordPrefix string `json:"continuing_subword_prefix"`
	} `json:"model"`
	Decoder *decoder `json:"decoder"`
}

// decoder is a tokenizer.json decoder, possibly a Sequence of them.
type decoder struct {
	Type        string     `json:"type"`
	Decoders    []*decoder `json:"decoders"`
	Replacement string     `json:"replacement"`
	Prefix      string     `json:"prefix"`
	Pattern     struct {
		String string `json:"String"`
	} `json:"pattern"`
	Content string `json:"content"`
}

// Parse reads a tokenizer.json. Its errors are one sentence about the file's
// content; the caller names the file.
func Parse(data []byte) (*Tokenizer, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %v", err)
	}
	pieces := map[int]string{}
	switch f.Model.Type {
	case "BPE", "WordPiece", "WordLevel", "":
		var vocab map[string]int
		if len(f.Model.Vocab) > 0 {
			if err := json.Unmarshal(f.Model.Vocab, &vocab); err != nil {
				return nil, fmt.Errorf("model.vocab of a %s model must map tokens to ids: %v", f.Model.Type, err)
			}
		}
		for piece, id := range vocab {
			pieces[id] = piece
		}
	case "Unigram":
		var vocab [][2]json.RawMessage
		if err := json.Unmarshal(f.Model.Vocab, &vocab); err != nil {
			return nil, fmt.Errorf("model.vocab of a Unigram model must be a list of [piece, score] pairs: %v", err)
		}
		for id, e := range vocab {
			var piece string
			if err := json.Unmarshal(e[0], &piece); err != nil {
				return nil, fmt.Errorf("model.vocab entry %d has no piece: %v", id, err)
			}
			pieces[id] = piece
		}
	default:
		return nil, fmt.Errorf("model type %q is not one this reader knows (BPE, WordPiece, WordLevel or Unigram)", f.Model.Type)
	}
	for _, a := range f.AddedTokens {
		pieces[a.ID] = a.Content
	}
	size := 0
	for id := range pieces {
		if id < 0 || id >= maxID {
			return nil, fmt.Errorf("token id %d is outside [0, %d)", id, maxID)
		}
		size = max(size, id+1)
	}
	t := &Tokenizer{text: make([][]byte, size), known: make([]bool, size), special: make([]bool, size)}
	rules := f.rules()
	for id, piece := range pieces {
		t.text[id], t.known[id] = rules(piece), true
	}
	for _, a := range f.AddedTokens {
		t.text[a.ID] = []byte(a.Content) // added tokens are written as they are
		t.special[a.ID] = a.Special
	}
	return t, nil
}

// rules returns how one piece becomes text under the file's model and
// decoder.
func (f *file) rules() func(piece string) []byte {
	var steps []func(string) string
	byteLevel, byteFallback := false, f.Model.ByteFallback
	var walk func(d *decoder)
	walk = func(d *decoder) {
		if d == nil {
			return
		}
		switch d.Type {
		case "Sequence":
			for _, s := range d.Decoders {
				walk(s)
			}
		case "ByteLevel":
			byteLevel = true
		case "ByteFallback":
			byteFallback = true
		case "Metaspace":
			r := d.Replacement
			if r == "" {
				r = "▁"
			}
			steps = append(steps, func(s string) string { return strings.ReplaceAll(s, r, " ") })
		case "Replace":
			from, to := d.Pattern.String, d.Content
			if from != "" {
				steps = append(steps, func(s string) string { return strings.ReplaceAll(s, from, to) })
			}
		case "WordPiece":
			p := d.Prefix
			if p == "" {
				p = "##"
			}
			steps = append(steps, wordPiece(p))
		}
	}
	walk(f.Decoder)
	if f.Model.Type == "WordPiece" && (f.Decoder == nil || f.Decoder.Type != "WordPiece") {
		p := f.Model.ContinuingSubwordPrefix
		if p == "" {
			p = "##"
		}
		steps = append(steps, wordPiece(p))
	}
	return func(piece string) []byte {
		if byteFallback {
			if b, ok := fallbackByte(piece); ok {
				return []byte{b}
			}
		}
		if byteLevel {
			return byteLevelBytes(piece)
		}
		for _, s := range steps {
			piece = s(piece)
		}
		return []byte(piece)
	}
}

// wordPiece shows a continuation piece ("##ing") without its prefix and a
// word-initial one with the space that precedes it in text.
func wordPiece(prefix string) func(string) string {
	return func(s string) string {
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			return rest
		}
		return " " + s
	}
}

// fallbackByte reads a byte-fallback piece, "<0x0A>".
func fallbackByte(piece string) (byte, bool) {
	if len(piece) != 6 || !strings.HasPrefix(piece, "<0x") || piece[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(piece[3:5], 16, 8)
	return byte(v), err == nil
}

// byteLevelDecode maps GPT-2's printable byte alphabet back to bytes: the
// printable Latin-1 bytes stand for themselves, the other 68 bytes for code
// points from 256 up, in byte order.
var byteLevelDecode = func() map[rune]byte {
	m := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			m[rune(b)] = byte(b)
		} else {
			m[rune(256+n)] = byte(b)
			n++
		}
	}
	return m
}()

// byteLevelBytes decodes a ByteLevel piece; characters outside its alphabet
// stay as they are (as the tokenizers library leaves them).
func byteLevelBytes(piece string) []byte {
	out := make([]byte, 0, len(piece))
	for _, r := range piece {
		if b, ok := byteLevelDecode[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

// Size returns one more than the largest id the tokenizer defines.
func (t *Tokenizer) Size() int { return len(t.text) }

// Known reports whether the tokenizer defines id.
func (t *Tokenizer) Known(id int64) bool {
	return t != nil && id >= 0 && id < int64(len(t.known)) && t.known[id]
}

// Text returns the bytes token id stands for, and false for an id the
// tokenizer does not define.
func (t *Tokenizer) Text(id int64) ([]byte, bool) {
	if !t.Known(id) {
		return nil, false
	}
	return t.text[id], true
}

// Show returns token id's text made visible: a space as ␣, a newline as ↵,
// a tab as ⇥, other control characters and bytes that are not UTF-8 as
// \xNN, invisible format characters as \uNNNN, the empty text as ∅. An id the tokenizer does not define (or a nil Tokenizer) shows as
// "#id".
func (t *Tokenizer) Show(id int64) string {
	b, ok := t.Text(id)
	if !ok {
		return "#" + strconv.FormatInt(id, 10)
	}
	if t.special[id] {
		return string(b)
	}
	return Visible(b)
}

// Visible makes text visible as Show does.
func Visible(b []byte) string {
	var s strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&s, `\x%02x`, b[0])
		case r == ' ':
			s.WriteString("␣")
		case r == '\n':
			s.WriteString("↵")
		case r == '\t':
			s.WriteString("⇥")
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar:
			if r < 0x100 {
				fmt.Fprintf(&s, `\x%02x`, r)
			} else {
				fmt.Fprintf(&s, `\u%04x`, r)
			}
		default:
			s.WriteRune(r)
		}
		b = b[n:]
	}
	if s.Len() == 0 {
		return "∅"
	}
	return s.String()
}

// Missing counts the ids in [0, vocab) the tokenizer does not define, and
// returns the first few, for the notice that says why some ids show bare.
func (t *Tokenizer) Missing(vocab int) (n int, first []int64) {
	for id := int64(0); id < int64(vocab); id++ {
		if !t.Known(id) {
			if len(first) < 3 {
				first = append(first, id)
			}
			n++
		}
	}
	return n, first
}

// Pieces lists every defined id with its visible text, by id (for a
// tokenizer's summary and its tests).
func (t *Tokenizer) Pieces() []string {
	ids := make([]int, 0, len(t.text))
	for id, ok := range t.known {
		if ok {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.Itoa(id) + ":" + t.Show(int64(id))
	}
	return out
}
