package session

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/tokens"
)

// maxTokenizerFile bounds a tokenizer.json given beside a dump: the largest
// real ones (256k-token vocabularies with their merges) are about 20 MB.
const maxTokenizerFile = 64 << 20

// tokenizerCache keeps the last few parsed tokenizers by content, so that
// every row page of a run does not parse its tokenizer again.
type tokenizerCache struct {
	mu   sync.Mutex
	keys [][32]byte
	toks map[[32]byte]*tokens.Tokenizer
}

const tokenizerCacheSize = 4

func (c *tokenizerCache) parse(data []byte) (*tokens.Tokenizer, error) {
	key := sha256.Sum256(data)
	c.mu.Lock()
	if t, ok := c.toks[key]; ok {
		c.mu.Unlock()
		return t, nil
	}
	c.mu.Unlock()
	t, err := tokens.Parse(data)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.toks == nil {
		c.toks = map[[32]byte]*tokens.Tokenizer{}
	}
	if _, ok := c.toks[key]; !ok {
		if len(c.keys) == tokenizerCacheSize {
			delete(c.toks, c.keys[0])
			c.keys = c.keys[1:]
		}
		c.keys = append(c.keys, key)
		c.toks[key] = t
	}
	return t, nil
}

// Tokenizer returns the tokenizer a job's token ids are shown with: the
// file at Job.TokenizerPath, else the dump's `tokenizer` metadata (a
// tokenizer.json as a string), else nil. It says where it came from ("" for
// none) and, in notices, which of the run's ids it does not define. A
// tokenizer that cannot be read is an *InputError naming the file.
func (s *Session) tokenizer(job Job, run *engine.Run) (tok *tokens.Tokenizer, from string, notices []string, err error) {
	var data []byte
	switch {
	case job.TokenizerPath != "":
		from = job.TokenizerName
		if from == "" {
			from = filepath.Base(job.TokenizerPath)
		}
		f, err := os.Open(job.TokenizerPath)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", nil, &InputError{Msg: fmt.Sprintf("%s: there is no such tokenizer file.", from), Err: err}
		}
		if err != nil {
			return nil, "", nil, fmt.Errorf("open tokenizer: %w", err)
		}
		defer f.Close()
		data, err = io.ReadAll(io.LimitReader(f, maxTokenizerFile+1))
		if err != nil {
			return nil, "", nil, fmt.Errorf("read tokenizer %s: %w", from, err)
		}
		if len(data) > maxTokenizerFile {
			return nil, "", nil, &InputError{Msg: fmt.Sprintf("%s is larger than a tokenizer.json may be (%s).", from, engine.FormatBytes(maxTokenizerFile))}
		}
	case run.Meta["tokenizer"] != "":
		from = run.Source + "'s tokenizer metadata"
		data = []byte(run.Meta["tokenizer"])
	default:
		return nil, "", nil, nil
	}
	tok, err = s.tokenizers.parse(data)
	if err != nil {
		return nil, "", nil, &InputError{Msg: fmt.Sprintf("%s: %s", from, err.Error()), Err: err}
	}
	if n, first := tok.Missing(run.Vocab()); n > 0 {
		notices = append(notices, fmt.Sprintf("The tokenizer (%s) does not define %d of the %d token ids (the first: %v); those are shown as bare ids.", from, n, run.Vocab(), first))
	}
	return tok, from, notices, nil
}

// Tokens returns the tokenizer a job's token ids are shown with: the file
// at Job.TokenizerPath, else the dump's `tokenizer` metadata; nil when
// there is none. A tokenizer that cannot be read is an *InputError.
func (s *Session) Tokens(job Job) (*tokens.Tokenizer, error) {
	run, f, err := s.open(job)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tok, _, _, err := s.tokenizer(job, run)
	return tok, err
}
