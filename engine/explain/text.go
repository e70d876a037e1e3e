package explain

// Namer gives a token id's text, made visible (tokens.Tokenizer.Show), and
// false for an id it does not define.
type Namer func(id int64) (string, bool)

// NameTokens fills d.Text with the text of every token id the row detail
// mentions: the table's tokens, the worst and chosen tokens, the sample
// bins, the speculative drafts, positions and trace, the draft tree's
// nodes, distributions and trace, and the n-gram sequences. Ids name does not define are left out (shown bare).
func (d *RowDetail) NameTokens(name Namer) {
	if name == nil {
		return
	}
	text := map[int64]string{}
	add := func(id int64) {
		if id < 0 {
			return
		}
		if _, ok := text[id]; ok {
			return
		}
		if s, ok := name(id); ok {
			text[id] = s
		}
	}
	for _, t := range d.Tokens {
		add(int64(t.Token))
	}
	for _, t := range d.Worst {
		add(int64(t.Token))
	}
	for _, l := range d.Logprobs {
		for _, t := range l.Tokens {
			add(int64(t.Token))
		}
	}
	for _, t := range d.Chosen {
		add(t)
	}
	if s := d.Samples; s != nil {
		for _, t := range s.Tokens {
			add(int64(t.Token))
		}
	}
	if s := d.Spec; s != nil {
		for _, t := range s.Drafts {
			add(t)
		}
		for _, p := range s.Positions {
			for _, t := range p.Tokens {
				add(int64(t.Token))
			}
		}
		if s.Trace != nil {
			for _, trial := range s.Trace.Step {
				for _, st := range trial {
					add(int64(st.Draft))
					add(int64(st.Resampled))
				}
			}
		}
	}
	if tr := d.Tree; tr != nil {
		for _, n := range tr.Node {
			add(n.Token)
			for _, t := range n.Final {
				add(int64(t.Token))
			}
		}
		for _, t := range tr.First {
			add(int64(t.Token))
		}
		if tr.Trace != nil {
			for _, trial := range tr.Trace.Tokens {
				for _, t := range trial {
					add(int64(t))
				}
			}
			for _, trial := range tr.Trace.Step {
				for _, st := range trial {
					add(int64(st.Drawn))
				}
			}
		}
	}
	if n := d.Ngram; n != nil {
		for _, seq := range [][]int64{n.Prompt, n.Generated, n.Reference} {
			for _, t := range seq {
				add(t)
			}
		}
		for _, dr := range n.Drafts {
			for _, t := range dr.Tokens {
				add(t)
			}
		}
	}
	if len(text) > 0 {
		d.Text = text
	}
}
