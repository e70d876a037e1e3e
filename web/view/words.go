package view

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sampviz/sampviz/engine"
)

// Words for the pages: sentences, plurals, times and lists.

// Sentence makes sure a message ends like a sentence.
func Sentence(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return "The dump cannot be used."
	}
	// Capitalise a leading word, but never a file name ("dump.npz: ...")
	// or a parameter's ("top_p must be ...").
	first, _, _ := strings.Cut(msg, " ")
	if r := []rune(msg); unicode.IsLower(r[0]) && !strings.ContainsAny(first, ".:/_") {
		r[0] = unicode.ToUpper(r[0])
		msg = string(r)
	}
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// Period ends msg with a full stop, leaving its first word as it is: a
// sentence that starts with an output's name ("cpu passes").
func Period(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg != "" && !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// Plural writes n and the noun, with an s unless n is 1.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Ago says how long ago t was, for the list of recent runs.
func Ago(t time.Time) string {
	d := time.Now().Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return t.Format("2 Jan 2006")
}

// ShapeString writes a tensor shape as the dump readers do: [4, 32000].
func ShapeString(shape []int) string { return engine.FormatShape(shape) }

// JoinNames lists names, comma-separated.
func JoinNames(names []string) string { return strings.Join(names, ", ") }
