package store

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func newRun(t *testing.T, s *Store, created time.Time) Run {
	t.Helper()
	r := Run{
		ID: NewID(), Created: created, FileName: "dump.safetensors",
		DumpSHA: "abc", DumpExt: ".safetensors", DumpSize: 42,
		Info: json.RawMessage(`{"op":"softmax"}`), Backend: "cpu", Params: json.RawMessage(`{}`),
	}
	if err := s.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunLifecycle(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := time.UnixMilli(1_700_000_000_000)
	a := newRun(t, s, base)
	b := newRun(t, s, base.Add(time.Second))

	tests := []struct {
		name    string
		act     func() error
		id, key string
		want    State
		verdict *Verdict
	}{
		{"new run is queued", func() error { return nil }, a.ID, "", Queued, nil},
		{"running", func() error { return s.SetRunning(a.ID, "") }, a.ID, "", Running, nil},
		{"done with verdict", func() error { return s.Finish(a.ID, "", Verdict{Pass: false, FailedRows: 3, Rows: 7}) }, a.ID, "", Done, &Verdict{FailedRows: 3, Rows: 7}},
		{"failed with message", func() error { return s.Fail(b.ID, "", "kernel fault") }, b.ID, "", Failed, nil},
		{"re-judgement queued", func() error {
			created, err := s.CreateJudgement(a.ID, "k1", json.RawMessage(`{"p":1}`))
			if err == nil && !created {
				return errors.New("not created")
			}
			return err
		}, a.ID, "k1", Queued, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.act(); err != nil {
				t.Fatal(err)
			}
			j, err := s.Judgement(tt.id, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != tt.want {
				t.Errorf("state = %s, want %s", j.State, tt.want)
			}
			if (j.Verdict == nil) != (tt.verdict == nil) || (j.Verdict != nil && *j.Verdict != *tt.verdict) {
				t.Errorf("verdict = %+v, want %+v", j.Verdict, tt.verdict)
			}
		})
	}

	if created, err := s.CreateJudgement(a.ID, "k1", nil); err != nil || created {
		t.Errorf("second CreateJudgement = %v, %v; want false, nil", created, err)
	}
	got, err := s.Run(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.FileName != a.FileName || !got.Created.Equal(a.Created) || string(got.Info) != string(a.Info) {
		t.Errorf("Run = %+v, want %+v", got, a)
	}
	if _, err := s.Run("zzzzzzzzzz"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing run: err = %v, want ErrNotFound", err)
	}
	list, err := s.Recent(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != b.ID || list[1].ID != a.ID {
		t.Fatalf("Recent = %+v, want b then a", list)
	}
	if list[0].Judgement.Message != "kernel fault" {
		t.Errorf("listed message = %q", list[0].Judgement.Message)
	}
}

func TestReopenKeepsUnfinished(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := newRun(t, s, time.Now())
	running := newRun(t, s, time.Now().Add(time.Second))
	queued := newRun(t, s, time.Now().Add(2*time.Second))
	if err := s.Finish(done.ID, "", Verdict{Pass: true, Rows: 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunning(running.ID, ""); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pending, err := s.Unfinished()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pending {
		ids = append(ids, p.ID)
	}
	if len(ids) != 2 || ids[0] != running.ID || ids[1] != queued.ID {
		t.Errorf("unfinished %v, want the running then the queued run (%s, %s)", ids, running.ID, queued.ID)
	}
	for name, want := range map[string]os.FileMode{"": 0o700, "index.sqlite": 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%q has mode %v, want %v", name, st.Mode().Perm(), want)
		}
	}
}

func TestRemove(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newRun(t, s, time.Now())
	b := newRun(t, s, time.Now().Add(time.Second)) // the same dump
	dump := s.DumpPath(a.DumpSHA, a.DumpExt)
	os.WriteFile(dump, []byte("dump"), 0o600)
	os.MkdirAll(s.RunDir(a.ID), 0o700)
	os.WriteFile(s.OutputsPath(a.ID), []byte("out"), 0o600)
	if err := s.Finish(a.ID, "", Verdict{Pass: true}); err != nil {
		t.Fatal(err)
	}
	oldest, err := s.Oldest()
	if err != nil || len(oldest) != 1 || oldest[0].ID != a.ID {
		t.Fatalf("oldest finished %v %v, want only %s (the other is queued)", oldest, err, a.ID)
	}
	if err := s.Remove(a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("run %s still there: %v", a.ID, err)
	}
	if _, err := os.Stat(s.RunDir(a.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its folder is still there: %v", err)
	}
	if _, err := os.Stat(dump); err != nil {
		t.Errorf("the dump went although run %s uses it: %v", b.ID, err)
	}
	if err := s.Remove(b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dump); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dump stayed after its last run went: %v", err)
	}
}

func TestWriteFileReplacesWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "report.json")
	if err := WriteFile(path, func(w io.Writer) error { _, err := w.Write([]byte("old")); return err }); err != nil {
		t.Fatal(err)
	}
	failing := errors.New("disk on fire")
	err := WriteFile(path, func(w io.Writer) error { w.Write([]byte("half")); return failing })
	if !errors.Is(err, failing) {
		t.Fatalf("err = %v, want the writer's error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("after a failed write the file holds %q, want the old content", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only the file", len(entries))
	}
}

func TestAdoptDumpKeepsExisting(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, content := range []string{"first", "second"} {
		f, err := s.TempFile("upload-*")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(content)
		f.Close()
		path, err := s.AdoptDump(f.Name(), "samehash", ".npy")
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != "first" {
			t.Errorf("adoption %d: stored dump holds %q, want the first content", i, b)
		}
		if _, err := os.Stat(f.Name()); !os.IsNotExist(err) {
			t.Errorf("adoption %d: temporary file still there", i)
		}
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{NewID(), true}, {"abcdefgh23", true}, {"../../etc/", false}, {"ABCDEFGH23", false}, {"short", false}, {"abcdefgh18", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if got := ValidID(tt.id); got != tt.want {
				t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}
