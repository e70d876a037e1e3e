package live

import (
	"log/slog"
	"sync"

	"github.com/sampviz/sampviz/web/store"
	"github.com/sampviz/sampviz/web/view"
)

// maxCachedTopics bounds the finished topics kept in memory.
const maxCachedTopics = 64

// topics holds the topics of queued, running and recently read judgements,
// by topicKey.
type topics struct {
	mu sync.Mutex
	m  map[string]*Topic
}

func newTopics() *topics { return &topics{m: map[string]*Topic{}} }

// topicKey names a judgement's topic.
func topicKey(runID, key string) string { return runID + "/" + key }

// load returns the topic of judgement j of run runID, with rows rows of
// vocab tokens, reading a finished one from its stream.json.
func (ts *topics) load(st *store.Store, log *slog.Logger, runID string, j store.Judgement, rows, vocab int) *Topic {
	k := topicKey(runID, j.Key)
	ts.mu.Lock()
	t := ts.m[k]
	ts.mu.Unlock()
	if t != nil {
		return t
	}
	var s stored
	if err := readJSON(st.JudgementPath(runID, j.Key, "stream.json"), &s); err != nil {
		// No stream: a failed or interrupted judgement. Its topic says so.
		t = newTopic(runID, j.Key, rows, vocab, view.Status{State: j.State, Message: j.Message})
		if j.State == store.Done {
			t.status = view.Status{State: store.Failed, Message: "The stored results of this run cannot be read; rerun it."}
			log.Error("read stream", "run", runID, "judgement", j.Key, "err", err)
		}
	} else {
		t = topicFromStored(runID, j.Key, s)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if old := ts.m[k]; old != nil {
		return old
	}
	ts.evictLocked()
	ts.m[k] = t
	return t
}

// add registers the topic of a queued judgement.
func (ts *topics) add(t *Topic) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.evictLocked()
	ts.m[topicKey(t.runID, t.key)] = t
}

// evictLocked forgets finished topics nobody watches when there are too many.
func (ts *topics) evictLocked() {
	if len(ts.m) < maxCachedTopics {
		return
	}
	for k, t := range ts.m {
		t.mu.Lock()
		idle := t.status.State.Finished() && len(t.subs) == 0
		t.mu.Unlock()
		if idle {
			delete(ts.m, k)
		}
	}
}

// forget drops the topics of run runID (deleted).
func (ts *topics) forget(runID string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k, t := range ts.m {
		if t.runID == runID {
			delete(ts.m, k)
		}
	}
}

// watched reports whether a page watches a topic of run runID.
func (ts *topics) watched(runID string) bool {
	ts.mu.Lock()
	var list []*Topic
	for _, t := range ts.m {
		if t.runID == runID {
			list = append(list, t)
		}
	}
	ts.mu.Unlock()
	for _, t := range list {
		if t.watched() {
			return true
		}
	}
	return false
}

// forgetOne drops the topic of judgement key of run runID.
func (ts *topics) forgetOne(runID, key string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.m, topicKey(runID, key))
}
