// Package store keeps what sampviz serve must not lose: the uploaded dumps,
// each run's outputs and reports, and the run index, all under one data
// directory. The index is SQLite (modernc.org/sqlite, no cgo); files are
// written to a temporary name and renamed into place, so a crash or a refused
// upload never leaves a half-written file where a reader looks.
//
// The store never parses dumps and never judges: it records what the web
// server tells it. Run and dump metadata are kept as JSON the server chose.
package store

import (
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/sampviz/sampviz/engine/durable"
)

// Errors the store returns.
var (
	// ErrNotFound: no run or judgement has that id.
	ErrNotFound = errors.New("not found")
)

// State is where a judgement is in its life.
type State string

// The states of a judgement. Queued and Running become Done, Failed or
// Cancelled; a server that stops leaves the unfinished ones for the next
// one, which queues them again (Unfinished), when it opens the
// store again.
const (
	Queued  State = "queued"
	Running State = "running"
	Done    State = "done"
	Failed  State = "failed"
	// Cancelled: a person stopped it before it finished.
	Cancelled State = "cancelled"
)

// Finished reports whether s is final.
func (s State) Finished() bool { return s == Done || s == Failed || s == Cancelled }

// Interrupted is the message of a judgement the server stopped during.
const Interrupted = "The server stopped before this run finished; rerun it to get a result."

// Run is one upload (or rerun) of a dump: the kernels of one backend on one
// dump with one set of parameters.
type Run struct {
	ID       string    `json:"id"`
	Created  time.Time `json:"created"`
	FileName string    `json:"file_name"`
	// DumpSHA and DumpExt locate the dump: dumps/<sha256>.<ext>.
	DumpSHA  string `json:"dump_sha256"`
	DumpExt  string `json:"-"`
	DumpSize int64  `json:"dump_size"`
	// Info describes the dump, Params the parameters the run overrides; both
	// are the server's JSON.
	Info    json.RawMessage `json:"info"`
	Backend string          `json:"backend"`
	Params  json.RawMessage `json:"params"`
	// Parent is the run this one reran, or "".
	Parent string `json:"parent,omitempty"`
}

// Judgement is one judgement of a run's outputs: the run's own (Key "") with
// the default tolerances, or a re-judgement with other tolerances.
type Judgement struct {
	RunID string `json:"run_id"`
	// Key names the tolerances: "" for the run's own judgement.
	Key string `json:"key"`
	// Tolerances are the server's JSON of the tolerances, nil for the defaults.
	Tolerances json.RawMessage `json:"tolerances,omitempty"`
	State      State           `json:"state"`
	// Message says why a judgement failed, in one sentence.
	Message  string    `json:"message,omitempty"`
	Verdict  *Verdict  `json:"verdict,omitempty"`
	Created  time.Time `json:"created"`
	Finished time.Time `json:"finished,omitzero"`
}

// Verdict is the outcome of a finished judgement.
type Verdict struct {
	Pass bool `json:"pass"`
	// FailedRows counts rows where at least one output fails; Rows is the
	// batch size.
	FailedRows int `json:"failed_rows"`
	Rows       int `json:"rows"`
}

// Listed is a run with its own judgement, for the list of recent runs.
type Listed struct {
	Run
	Judgement Judgement `json:"judgement"`
}

// Store is a data directory. Its methods are safe for concurrent use.
type Store struct {
	dir string
	db  *sql.DB
}

const schema = `
CREATE TABLE IF NOT EXISTS runs (
	id         TEXT PRIMARY KEY,
	created_ms INTEGER NOT NULL,
	file_name  TEXT NOT NULL,
	dump_sha   TEXT NOT NULL,
	dump_ext   TEXT NOT NULL,
	dump_size  INTEGER NOT NULL,
	info       TEXT NOT NULL,
	backend    TEXT NOT NULL,
	params     TEXT NOT NULL,
	parent     TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS judgements (
	run_id      TEXT NOT NULL REFERENCES runs(id),
	key         TEXT NOT NULL,
	tolerances  TEXT NOT NULL DEFAULT '',
	state       TEXT NOT NULL,
	message     TEXT NOT NULL DEFAULT '',
	pass        INTEGER,
	failed_rows INTEGER NOT NULL DEFAULT 0,
	rows        INTEGER NOT NULL DEFAULT 0,
	created_ms  INTEGER NOT NULL,
	finished_ms INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, key)
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_ms);
`

// Open opens (creating it when needed) the data directory dir, readable by
// its owner only. Judgements that were queued or running when the last
// server stopped stay so: Unfinished lists them, to queue them again.
func Open(dir string) (*Store, error) {
	for _, sub := range []string{"", "dumps", "runs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	// The dumps are other people's data: the folder is its owner's alone,
	// whatever an earlier version or the umask made of it.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict data directory: %w", err)
	}
	// Leftovers of uploads that were cut off by a stop are never adopted.
	if tmp, err := os.ReadDir(filepath.Join(dir, "tmp")); err == nil {
		for _, e := range tmp {
			os.Remove(filepath.Join(dir, "tmp", e.Name()))
		}
	}
	index := filepath.Join(dir, "index.sqlite")
	if f, err := os.OpenFile(index, os.O_CREATE|os.O_RDWR, 0o600); err == nil {
		f.Close()
	}
	dsn := "file:" + index + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open run index: %w", err)
	}
	// One connection: writes are rare and small, and SQLite serialises them anyway.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create run index: %w", err)
	}
	for _, name := range []string{index, index + "-wal", index + "-shm"} {
		if err := os.Chmod(name, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			db.Close()
			return nil, fmt.Errorf("restrict run index: %w", err)
		}
	}
	return &Store{dir: dir, db: db}, nil
}

// Close closes the index.
func (s *Store) Close() error { return s.db.Close() }

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }

// NewID returns a fresh run id: 10 lowercase base32 characters.
func NewID() string {
	var b [10]byte
	rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.EncodeToString(b[:]))[:10]
}

// ValidID reports whether id could be a run id; handlers check it before
// building paths from it.
func ValidID(id string) bool {
	if len(id) != 10 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// TempFile creates a file in the data directory's tmp folder, on the same
// file system as its final place, so that a rename adopts it.
func (s *Store) TempFile(pattern string) (*os.File, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), pattern)
	if err != nil {
		return nil, fmt.Errorf("create temporary file: %w", err)
	}
	return f, nil
}

// DumpPath returns where the dump with this content hash and extension lives.
func (s *Store) DumpPath(sha, ext string) string {
	return filepath.Join(s.dir, "dumps", sha+ext)
}

// AdoptDump moves a complete, validated upload at tmpPath into place as the
// dump with content hash sha. A dump with the same content that is already
// stored is kept and tmpPath removed.
func (s *Store) AdoptDump(tmpPath, sha, ext string) (string, error) {
	dst := s.DumpPath(sha, ext)
	if _, err := os.Stat(dst); err == nil {
		os.Remove(tmpPath)
		return dst, nil
	}
	if err := os.Rename(tmpPath, dst); err != nil {
		return "", fmt.Errorf("store dump: %w", err)
	}
	if err := durable.SyncDir(filepath.Dir(dst)); err != nil {
		return "", fmt.Errorf("store dump: %w", err)
	}
	return dst, nil
}

// TokenizerPath is where run id keeps the tokenizer.json uploaded with its
// dump (absent when none was).
func (s *Store) TokenizerPath(id string) string {
	return filepath.Join(s.RunDir(id), "tokenizer.json")
}

// AdoptTokenizer gives run id the tokenizer at src: a temporary file of
// the upload, moved (keep false), or another run's, copied (keep true).
func (s *Store) AdoptTokenizer(id, src string, keep bool) error {
	dst := s.TokenizerPath(id)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("store tokenizer: %w", err)
	}
	if !keep {
		if err := os.Rename(src, dst); err != nil {
			return fmt.Errorf("store tokenizer: %w", err)
		}
		if err := durable.SyncDir(filepath.Dir(dst)); err != nil {
			return fmt.Errorf("store tokenizer: %w", err)
		}
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("store tokenizer: %w", err)
	}
	defer in.Close()
	if err := durable.WriteFile(dst, func(w io.Writer) error { _, err := io.Copy(w, in); return err }); err != nil {
		return fmt.Errorf("store tokenizer: %w", err)
	}
	return nil
}

// RunDir returns the folder of run id's outputs and reports.
func (s *Store) RunDir(id string) string { return filepath.Join(s.dir, "runs", id) }

// OutputsPath returns where run id keeps the outputs its backend produced.
func (s *Store) OutputsPath(id string) string {
	return filepath.Join(s.RunDir(id), "outputs.safetensors")
}

// JudgementPath returns the path of a file of judgement key of run id.
func (s *Store) JudgementPath(id, key, file string) string {
	if key == "" {
		key = "default"
	}
	return filepath.Join(s.RunDir(id), "judgements", key, file)
}

// WriteFile writes path through write durably (engine/durable): a reader
// sees the old file or the whole new one, on disk before the rename.
func WriteFile(path string, write func(w io.Writer) error) error {
	return durable.WriteFile(path, write)
}

// CreateRun records run and its own judgement, queued.
func (s *Store) CreateRun(run Run) error {
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO runs (id, created_ms, file_name, dump_sha, dump_ext, dump_size, info, backend, params, parent)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		run.ID, run.Created.UnixMilli(), run.FileName, run.DumpSHA, run.DumpExt, run.DumpSize,
		string(orNull(run.Info)), run.Backend, string(orNull(run.Params)), run.Parent); err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	if _, err := tx.Exec(`INSERT INTO judgements (run_id, key, state, created_ms) VALUES (?, '', ?, ?)`,
		run.ID, Queued, run.Created.UnixMilli()); err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record run: %w", err)
	}
	return nil
}

// CreateJudgement records a queued re-judgement of run id under key. It
// returns false, and changes nothing, when that judgement already exists.
func (s *Store) CreateJudgement(id, key string, tolerances json.RawMessage) (bool, error) {
	res, err := s.db.Exec(`INSERT OR IGNORE INTO judgements (run_id, key, tolerances, state, created_ms) VALUES (?, ?, ?, ?, ?)`,
		id, key, string(tolerances), Queued, time.Now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("record judgement: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record judgement: %w", err)
	}
	return n == 1, nil
}

// DeleteJudgement forgets a judgement that was never queued (the queue
// refused it), so that asking again tries again.
func (s *Store) DeleteJudgement(id, key string) error {
	if _, err := s.db.Exec(`DELETE FROM judgements WHERE run_id = ? AND key = ? AND state = ?`, id, key, Queued); err != nil {
		return fmt.Errorf("forget judgement: %w", err)
	}
	return nil
}

// DeleteRun forgets a run that was never queued, with its judgements.
func (s *Store) DeleteRun(id string) error {
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("forget run: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`DELETE FROM judgements WHERE run_id = ?`, id); err != nil {
		return fmt.Errorf("forget run: %w", err)
	}
	if _, err := tx.Exec(`DELETE FROM runs WHERE id = ?`, id); err != nil {
		return fmt.Errorf("forget run: %w", err)
	}
	return tx.Commit()
}

// SetRunning marks a judgement as running.
func (s *Store) SetRunning(id, key string) error {
	if _, err := s.db.Exec(`UPDATE judgements SET state = ? WHERE run_id = ? AND key = ?`, Running, id, key); err != nil {
		return fmt.Errorf("mark running: %w", err)
	}
	return nil
}

// Fail marks a judgement as failed with one sentence saying why.
func (s *Store) Fail(id, key, message string) error {
	if _, err := s.db.Exec(`UPDATE judgements SET state = ?, message = ?, finished_ms = ? WHERE run_id = ? AND key = ?`,
		Failed, message, time.Now().UnixMilli(), id, key); err != nil {
		return fmt.Errorf("mark failed: %w", err)
	}
	return nil
}

// Finish marks a judgement as done with its verdict.
func (s *Store) Finish(id, key string, v Verdict) error {
	if _, err := s.db.Exec(`UPDATE judgements SET state = ?, pass = ?, failed_rows = ?, rows = ?, finished_ms = ? WHERE run_id = ? AND key = ?`,
		Done, v.Pass, v.FailedRows, v.Rows, time.Now().UnixMilli(), id, key); err != nil {
		return fmt.Errorf("mark done: %w", err)
	}
	return nil
}

const runColumns = `r.id, r.created_ms, r.file_name, r.dump_sha, r.dump_ext, r.dump_size, r.info, r.backend, r.params, r.parent`
const judgementColumns = `j.run_id, j.key, j.tolerances, j.state, j.message, j.pass, j.failed_rows, j.rows, j.created_ms, j.finished_ms`

type scanner interface{ Scan(dest ...any) error }

func scanRun(sc scanner, r *Run, more ...any) error {
	var created int64
	var info, params string
	dest := append([]any{&r.ID, &created, &r.FileName, &r.DumpSHA, &r.DumpExt, &r.DumpSize, &info, &r.Backend, &params, &r.Parent}, more...)
	if err := sc.Scan(dest...); err != nil {
		return err
	}
	r.Created = time.UnixMilli(created)
	r.Info = json.RawMessage(info)
	r.Params = json.RawMessage(params)
	return nil
}

// judgementScan holds the columns of a judgement row until they are decoded.
type judgementScan struct {
	tol                 string
	pass                sql.NullBool
	failed, rows        int
	created, finishedMS int64
}

func (js *judgementScan) dest(j *Judgement) []any {
	return []any{&j.RunID, &j.Key, &js.tol, &j.State, &j.Message, &js.pass, &js.failed, &js.rows, &js.created, &js.finishedMS}
}

func (js *judgementScan) decode(j *Judgement) {
	if js.tol != "" {
		j.Tolerances = json.RawMessage(js.tol)
	}
	if js.pass.Valid {
		j.Verdict = &Verdict{Pass: js.pass.Bool, FailedRows: js.failed, Rows: js.rows}
	}
	j.Created = time.UnixMilli(js.created)
	if js.finishedMS != 0 {
		j.Finished = time.UnixMilli(js.finishedMS)
	}
}

// Run returns run id, or ErrNotFound.
func (s *Store) Run(id string) (Run, error) {
	var r Run
	err := scanRun(s.db.QueryRow(`SELECT `+runColumns+` FROM runs r WHERE r.id = ?`, id), &r)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("read run %s: %w", id, err)
	}
	return r, nil
}

// Judgement returns judgement key of run id, or ErrNotFound.
func (s *Store) Judgement(id, key string) (Judgement, error) {
	var j Judgement
	var js judgementScan
	err := s.db.QueryRow(`SELECT `+judgementColumns+` FROM judgements j WHERE j.run_id = ? AND j.key = ?`, id, key).Scan(js.dest(&j)...)
	if errors.Is(err, sql.ErrNoRows) {
		return Judgement{}, ErrNotFound
	}
	if err != nil {
		return Judgement{}, fmt.Errorf("read judgement of run %s: %w", id, err)
	}
	js.decode(&j)
	return j, nil
}

// Recent returns up to limit runs, newest first, each with its own judgement.
func (s *Store) Recent(limit int) ([]Listed, error) {
	rows, err := s.db.Query(`SELECT `+runColumns+`, `+judgementColumns+` FROM runs r
		JOIN judgements j ON j.run_id = r.id AND j.key = ''
		ORDER BY r.created_ms DESC, r.id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []Listed
	for rows.Next() {
		var l Listed
		var js judgementScan
		if err := scanRun(rows, &l.Run, js.dest(&l.Judgement)...); err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		js.decode(&l.Judgement)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// Cancel marks an unfinished judgement as cancelled, with one sentence.
func (s *Store) Cancel(id, key, message string) error {
	if _, err := s.db.Exec(`UPDATE judgements SET state = ?, message = ?, finished_ms = ? WHERE run_id = ? AND key = ? AND state IN (?, ?)`,
		Cancelled, message, time.Now().UnixMilli(), id, key, Queued, Running); err != nil {
		return fmt.Errorf("mark cancelled: %w", err)
	}
	return nil
}

// Requeue marks a judgement queued again (one the last server left
// unfinished).
func (s *Store) Requeue(id, key string) error {
	if _, err := s.db.Exec(`UPDATE judgements SET state = ? WHERE run_id = ? AND key = ?`, Queued, id, key); err != nil {
		return fmt.Errorf("queue again: %w", err)
	}
	return nil
}

// Pending is an unfinished judgement with its run.
type Pending struct {
	Run
	Judgement Judgement
}

// Unfinished lists the judgements that are queued or running, oldest first:
// at start, those the last server left.
func (s *Store) Unfinished() ([]Pending, error) {
	rows, err := s.db.Query(`SELECT `+runColumns+`, `+judgementColumns+` FROM judgements j
		JOIN runs r ON r.id = j.run_id WHERE j.state IN (?, ?) ORDER BY j.created_ms, r.id, j.key`, Queued, Running)
	if err != nil {
		return nil, fmt.Errorf("list unfinished runs: %w", err)
	}
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var p Pending
		var js judgementScan
		if err := scanRun(rows, &p.Run, js.dest(&p.Judgement)...); err != nil {
			return nil, fmt.Errorf("list unfinished runs: %w", err)
		}
		js.decode(&p.Judgement)
		out = append(out, p)
	}
	return out, rows.Err()
}

// Judgements lists run id's judgements, oldest first.
func (s *Store) Judgements(id string) ([]Judgement, error) {
	rows, err := s.db.Query(`SELECT `+judgementColumns+` FROM judgements j WHERE j.run_id = ? ORDER BY j.created_ms, j.key`, id)
	if err != nil {
		return nil, fmt.Errorf("list judgements of run %s: %w", id, err)
	}
	defer rows.Close()
	var out []Judgement
	for rows.Next() {
		var j Judgement
		var js judgementScan
		if err := rows.Scan(js.dest(&j)...); err != nil {
			return nil, fmt.Errorf("list judgements of run %s: %w", id, err)
		}
		js.decode(&j)
		out = append(out, j)
	}
	return out, rows.Err()
}

// ForgetJudgement removes a finished re-judgement with its files.
func (s *Store) ForgetJudgement(id, key string) error {
	if key == "" {
		return fmt.Errorf("forget judgement: the run's own judgement goes with the run")
	}
	if _, err := s.db.Exec(`DELETE FROM judgements WHERE run_id = ? AND key = ?`, id, key); err != nil {
		return fmt.Errorf("forget judgement: %w", err)
	}
	return os.RemoveAll(filepath.Dir(s.JudgementPath(id, key, "x")))
}

// Remove deletes run id: its judgements, its files, and its dump when no
// other run uses it. The index goes first, so a stop half way leaves files
// no run points to (removed by the next Remove of their dump's last run,
// or harmless), never a run without its files.
func (s *Store) Remove(id string) error {
	run, err := s.Run(id)
	if err != nil {
		return err
	}
	if err := s.DeleteRun(id); err != nil {
		return err
	}
	if err := os.RemoveAll(s.RunDir(id)); err != nil {
		return fmt.Errorf("remove files of run %s: %w", id, err)
	}
	var others int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM runs WHERE dump_sha = ? AND dump_ext = ?`, run.DumpSHA, run.DumpExt).Scan(&others); err != nil {
		return fmt.Errorf("remove run %s: %w", id, err)
	}
	if others == 0 {
		if err := os.Remove(s.DumpPath(run.DumpSHA, run.DumpExt)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove dump of run %s: %w", id, err)
		}
	}
	return nil
}

// Oldest lists the runs whose judgements have all finished, oldest first:
// what retention may remove.
func (s *Store) Oldest() ([]Run, error) {
	rows, err := s.db.Query(`SELECT `+runColumns+` FROM runs r
		WHERE NOT EXISTS (SELECT 1 FROM judgements j WHERE j.run_id = r.id AND j.state IN (?, ?))
		ORDER BY r.created_ms, r.id`, Queued, Running)
	if err != nil {
		return nil, fmt.Errorf("list finished runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		if err := scanRun(rows, &r); err != nil {
			return nil, fmt.Errorf("list finished runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Count returns the number of runs.
func (s *Store) Count() (int, error) {
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM runs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count runs: %w", err)
	}
	return n, nil
}

// Usage returns the bytes the data directory's files take.
func (s *Store) Usage() (int64, error) {
	var n int64
	err := filepath.WalkDir(s.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure data directory: %w", err)
	}
	return n, nil
}

// Finished returns the newest run of a dump with these params and backend
// whose own judgement is done, or ErrNotFound: a built-in scenario opened
// again reuses it.
func (s *Store) Finished(sha, ext string, params json.RawMessage, backend string) (Run, error) {
	var r Run
	err := scanRun(s.db.QueryRow(`SELECT `+runColumns+` FROM runs r JOIN judgements j ON j.run_id = r.id AND j.key = ''
		WHERE r.dump_sha = ? AND r.dump_ext = ? AND r.params = ? AND r.backend = ? AND r.parent = '' AND j.state = ?
		ORDER BY r.created_ms DESC LIMIT 1`, sha, ext, string(orNull(params)), backend, Done), &r)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("find a finished run: %w", err)
	}
	return r, nil
}
