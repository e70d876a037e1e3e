package view

import "strconv"

// Tokens shows token ids on a page: with the text a tokenizer gives them
// (explain.RowDetail.Text, lesson.State.Text) beside the id, else the id
// alone. A nil Tokens shows ids.
type Tokens map[int64]string

// Label is a token as a sentence or a table cell names it: "6639 ‹␣the›",
// or "6639" without text.
func (t Tokens) Label(id int64) string {
	if s, ok := t[id]; ok {
		return strconv.FormatInt(id, 10) + " ‹" + s + "›"
	}
	return strconv.FormatInt(id, 10)
}

// Axis is a token as a chart's category axis names it: "␣the" over
// "#6639", or "#6639" without text (the id keeps every category distinct).
func (t Tokens) Axis(id int64) string {
	if s, ok := t[id]; ok {
		return s + "\n#" + strconv.FormatInt(id, 10)
	}
	return "#" + strconv.FormatInt(id, 10)
}

// Text is a token's text alone ("" without one), for a table's text column.
func (t Tokens) Text(id int64) string { return t[id] }

// Short is a token as a small label names it, on a tree's node: its text
// alone, or "#6639" without text.
func (t Tokens) Short(id int64) string {
	if s, ok := t[id]; ok {
		return s
	}
	return "#" + strconv.FormatInt(id, 10)
}
