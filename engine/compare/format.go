package compare

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// num formats a number for a message with two significant digits: plainly
// between 0.01 and 10^4 ("0.031", "12", "1234"), in short exponent form
// otherwise ("2.1e-3", "1e-5").
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case a >= 100 && a < 1e4:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 0.01 && a < 100:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return sci(v)
}

// sci formats v in short exponent form with two significant digits:
// "1.6e-2", "1e-5", "3e+6" become "1.6e-2", "1e-5", "3e6".
func sci(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return num(v)
	}
	s := strconv.FormatFloat(v, 'e', 1, 64) // "2.1e-03"
	mant, exp, _ := strings.Cut(s, "e")
	mant = strings.TrimSuffix(mant, ".0")
	sign := ""
	if exp[0] == '-' {
		sign = "-"
	}
	exp = strings.TrimLeft(exp[1:], "0")
	if exp == "" {
		return mant
	}
	return mant + "e" + sign + exp
}

// share formats a fraction as a percentage: "0.12%".
func share(n, of int) string {
	if of == 0 {
		return "0%"
	}
	v := 100 * float64(n) / float64(of)
	if v >= 10 {
		return strconv.FormatFloat(v, 'f', 0, 64) + "%" // "100%", not "1e+02%"
	}
	return strconv.FormatFloat(v, 'g', 2, 64) + "%"
}

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
