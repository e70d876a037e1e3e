package web

import (
	"encoding/json"
	"os"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web/live"
	"github.com/sampviz/sampviz/web/store"
)

// createRun records run and queues its judgement in a place the caller
// reserved (live.Runs.Reserve).
//
// tokenizer, when not "", is a tokenizer.json the run shows token text
// with: an upload's temporary file (moved) or another run's (copied,
// keepTokenizer).
func (s *Server) createRun(run store.Run, info *session.DumpInfo, p engine.Overrides, tokenizer string, keepTokenizer bool) (store.Run, error) {
	var err error
	run.ID = store.NewID()
	run.Created = time.Now()
	if run.Info, err = json.Marshal(info); err != nil {
		return store.Run{}, internal(err)
	}
	if run.Params, err = json.Marshal(p); err != nil {
		return store.Run{}, internal(err)
	}
	if tokenizer != "" {
		if err := s.store.AdoptTokenizer(run.ID, tokenizer, keepTokenizer); err != nil {
			return store.Run{}, storeError(err)
		}
	}
	if err := s.store.CreateRun(run); err != nil {
		return store.Run{}, internal(err)
	}
	s.runs.Enqueue(live.Task{Job: s.job(run, p, nil), RunID: run.ID, Rows: info.Rows, Vocab: info.Vocab})
	s.log.Info("run queued", "run", run.ID, "file", run.FileName, "op", info.Op, "backend", run.Backend)
	return run, nil
}

// job returns the session's job for run with parameters p, to judge with tol
// (nil: the run's own tolerances).
func (s *Server) job(run store.Run, p engine.Overrides, tol *engine.Tolerances) session.Job {
	job := session.Job{
		DumpPath: s.store.DumpPath(run.DumpSHA, run.DumpExt), FileName: run.FileName,
		OutputsPath: s.store.OutputsPath(run.ID), Backend: run.Backend, Overrides: p, Tolerances: tol,
		Label: run.ID,
	}
	if run.ID != "" {
		if path := s.store.TokenizerPath(run.ID); fileExists(path) {
			job.TokenizerPath, job.TokenizerName = path, "the tokenizer uploaded with it"
		}
	}
	return job
}

// defaultBackend names the backend new runs use.
func (s *Server) defaultBackend() string {
	if bs := s.runner.Backends(); len(bs) > 0 {
		return bs[0].Backend
	}
	return "cpu"
}

// requeue queues again the judgements the last server left queued or
// running, in the order they were asked for; one whose dump is gone fails
// with a sentence.
func (s *Server) requeue() {
	pending, err := s.store.Unfinished()
	if err != nil {
		s.log.Error("list unfinished runs", "err", err)
		return
	}
	for _, p := range pending {
		run, info, params, err := s.lookupRun(p.ID)
		if err == nil {
			_, err = os.Stat(s.store.DumpPath(run.DumpSHA, run.DumpExt))
		}
		var tol *engine.Tolerances
		if err == nil && p.Judgement.Key != "" {
			tol = new(engine.Tolerances)
			err = json.Unmarshal(p.Judgement.Tolerances, tol)
		}
		if err != nil {
			s.log.Error("queue again", "run", p.ID, "judgement", p.Judgement.Key, "err", err)
			if ferr := s.store.Fail(p.ID, p.Judgement.Key, store.Interrupted); ferr != nil {
				s.log.Error("record failed run", "run", p.ID, "err", ferr)
			}
			continue
		}
		s.runs.Requeue(live.Task{Job: s.job(run, params, tol), RunID: run.ID, Key: p.Judgement.Key,
			Rejudge: p.Judgement.Key != "", Rows: info.Rows, Vocab: info.Vocab})
		s.log.Info("run queued again", "run", run.ID, "judgement", p.Judgement.Key)
	}
}

// fileExists reports whether path names a file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
