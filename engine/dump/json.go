package dump

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The header JSON is read token by token with encoding/json's Decoder:
// decoding into a map would silently keep the last of two duplicate keys,
// which for a tensor name hides a broken file.

// tokenKind names a JSON token for messages: "a string", "a list", ...
func tokenKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// jsonRuleError is a broken rule found while reading JSON; the caller turns it
// into an *Error with the file and tensor it is about.
type jsonRuleError struct {
	rule string
	err  error // a syntax error from the decoder, or nil
}

func (e *jsonRuleError) Error() string {
	if e.err != nil {
		return e.rule + ": " + e.err.Error()
	}
	return e.rule
}

func ruleErr(format string, args ...any) *jsonRuleError {
	return &jsonRuleError{rule: fmt.Sprintf(format, args...)}
}

// nextToken reads one token, turning a decoder failure into "is not JSON".
func nextToken(dec *json.Decoder) (json.Token, *jsonRuleError) {
	tok, err := dec.Token()
	if err != nil {
		return nil, &jsonRuleError{rule: "is not JSON", err: jsonCause(err)}
	}
	return tok, nil
}

// jsonCause words a decoder failure for a person: where the syntax broke, or
// that the text ended early.
func jsonCause(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%w (at byte %d)", err, se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("it ends before its last object closes")
	}
	return err
}

// skipValue consumes one value whose content does not matter, nested or not.
func skipValue(dec *json.Decoder) *jsonRuleError {
	var skip json.RawMessage
	if err := dec.Decode(&skip); err != nil {
		return &jsonRuleError{rule: "is not JSON", err: jsonCause(err)}
	}
	return nil
}

// decodeStringMap reads an object of string values (or null, which gives a
// nil map). what names the object in messages ("__metadata__").
func decodeStringMap(dec *json.Decoder, what string) (map[string]string, *jsonRuleError) {
	tok, rerr := nextToken(dec)
	if rerr != nil {
		return nil, rerr
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, ruleErr("%s must be an object mapping strings to strings, not %s", what, tokenKind(tok))
	}
	m := map[string]string{}
	for dec.More() {
		tok, rerr := nextToken(dec)
		if rerr != nil {
			return nil, rerr
		}
		key := tok.(string) // object keys are always strings
		if _, dup := m[key]; dup {
			return nil, ruleErr("%s has the key %q twice", what, key)
		}
		tok, rerr = nextToken(dec)
		if rerr != nil {
			return nil, rerr
		}
		s, ok := tok.(string)
		if !ok {
			hint := ""
			if n, isNum := tok.(json.Number); isNum {
				hint = fmt.Sprintf(`; write it as a string ("%s")`, n)
			}
			return nil, ruleErr("%s must map strings to strings, but %q holds %s%s", what, key, tokenKind(tok), hint)
		}
		m[key] = s
	}
	if _, rerr := nextToken(dec); rerr != nil { // the closing brace
		return nil, rerr
	}
	return m, nil
}

// decodeIntList reads a list of at most limit integers; what names it in
// messages.
func decodeIntList(dec *json.Decoder, what string, limit int) ([]int64, *jsonRuleError) {
	tok, rerr := nextToken(dec)
	if rerr != nil {
		return nil, rerr
	}
	if tok != json.Delim('[') {
		return nil, ruleErr("%s must be a list of integers, not %s", what, tokenKind(tok))
	}
	var out []int64
	for dec.More() {
		tok, rerr := nextToken(dec)
		if rerr != nil {
			return nil, rerr
		}
		n, ok := tok.(json.Number)
		if !ok {
			return nil, ruleErr("%s must be a list of integers, but holds %s", what, tokenKind(tok))
		}
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			if strings.ContainsAny(n.String(), ".eE") {
				return nil, ruleErr("%s must be a list of integers, but holds %s", what, n)
			}
			return nil, ruleErr("%s holds %s, which does not fit in 64 bits", what, n)
		}
		if len(out) == limit {
			return nil, ruleErr("%s holds more than %d integers", what, limit)
		}
		out = append(out, v)
	}
	if _, rerr := nextToken(dec); rerr != nil { // the closing bracket
		return nil, rerr
	}
	return out, nil
}

// endOfJSON checks that nothing but whitespace follows the value just read.
func endOfJSON(dec *json.Decoder, what string) *jsonRuleError {
	if _, err := dec.Token(); err != io.EOF {
		return ruleErr("%s has more after its JSON object", what)
	}
	return nil
}
