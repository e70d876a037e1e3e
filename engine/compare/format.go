package compare

import (
	"fmt"
	"strconv"
)

// plural returns "1 token" or "3 tokens".
func plural(n int, one string) string {
	s := strconv.Itoa(n) + " " + one
	if n != 1 {
		s += "s"
	}
	return s
}

// firstTokens lists up to n tokens: "3, 9 and 12", "3, 9, 12, ...".
func firstTokens(toks []int, n int) string {
	s := ""
	for i, t := range toks {
		switch {
		case i == n:
			return s + ", ..."
		case i == 0:
		case i == len(toks)-1:
			s += " and "
		default:
			s += ", "
		}
		s += fmt.Sprint(t)
	}
	return s
}
