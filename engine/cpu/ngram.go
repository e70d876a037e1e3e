package cpu

// Draft returns the prompt-lookup draft of one row, at most limit tokens:
// for n from maxNgramSize down to 1 (skipping n > len(generated)), the
// pattern is the last n generated tokens; it is searched in prompt for the
// leftmost s with prompt[s:s+n] equal to it and s+n < len(prompt), and the
// draft is prompt[s+n : min(s+n+limit, len(prompt))]; when the prompt has no
// match, generated is searched the same way (s+n < len(generated), which
// excludes the pattern's own position). The first n that matches wins. It
// returns nil when limit is 0, generated is empty or nothing matches. prompt
// is input_ids[0:input_ids_len] and generated is pre_ids[0:step_idx].
func Draft(prompt, generated []int64, maxNgramSize, limit int) []int64 {
	if limit <= 0 || len(generated) == 0 {
		return nil
	}
	for n := min(maxNgramSize, len(generated)); n >= 1; n-- {
		pattern := generated[len(generated)-n:]
		if d := lookup(prompt, pattern, limit); d != nil {
			return d
		}
		if d := lookup(generated, pattern, limit); d != nil {
			return d
		}
	}
	return nil
}

// lookup returns the at most limit tokens of ids that follow the leftmost
// occurrence of pattern that has at least one token after it, or nil.
func lookup(ids, pattern []int64, limit int) []int64 {
	n := len(pattern)
	for s := 0; s+n < len(ids); s++ {
		if equal(ids[s:s+n], pattern) {
			end := min(s+n+limit, len(ids))
			return append([]int64(nil), ids[s+n:end]...)
		}
	}
	return nil
}

func equal(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
