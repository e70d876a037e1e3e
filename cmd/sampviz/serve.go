package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sampviz/sampviz/engine"
	"github.com/sampviz/sampviz/engine/cpu"
	"github.com/sampviz/sampviz/engine/session"
	"github.com/sampviz/sampviz/web"
)

func init() {
	commands["serve"] = command{
		summary: "serve the web UI: upload a dump, watch its rows get judged",
		run:     func(args []string) int { return runServe(args, os.Stdout, os.Stderr) },
	}
}

// serveFlags are sampviz serve's flags.
type serveFlags struct {
	listen, data, token string
	insecure            bool
	backend, kernels    string
	maxUpload           byteSize
	maxMemory, maxData  byteSize
	queue, keepRuns     int
	allowHosts          hostList
	gpus                gpuList
}

// hostList is a repeatable flag of host names.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(s string) error {
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*h = append(*h, name)
		}
	}
	return nil
}

// byteSize is a flag of bytes that takes "4GiB", "512MiB", "100MB" or a
// plain number.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q is not a size (try 4GiB or 500MB)", s)
	}
	*b = byteSize(v * float64(mult))
	return nil
}

func defaultDataDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "sampviz")
	}
	return filepath.Join(os.TempDir(), "sampviz")
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fl := serveFlags{maxUpload: web.DefaultMaxUpload}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&fl.listen, "listen", "127.0.0.1:8080", "address to serve on; one other machines can reach needs --token or --insecure")
	fs.StringVar(&fl.data, "data", defaultDataDir(), "data directory: dumps, outputs, reports and the run index")
	fs.StringVar(&fl.token, "token", "", "secret every request must carry (Authorization: Bearer, ?token= or its cookie)")
	fs.BoolVar(&fl.insecure, "insecure", false, "serve a non-loopback address without --token")
	fs.StringVar(&fl.backend, "backend", "auto", "kernels to run: auto (cuda when a GPU answers, else cpu), cpu or cuda")
	fs.StringVar(&fl.kernels, "kernels", "", "path of libsampviz_kernels.so for the cuda backend")
	fs.Var(&fl.gpus, "gpus", "GPUs to run kernels on, one worker each, as CUDA numbers them (0,2); default: every GPU")
	fs.Var(&fl.maxUpload, "max-upload", "largest dump an upload may carry (4GiB, 500MB, ...)")
	fs.IntVar(&fl.queue, "queue", web.DefaultQueue, "runs that may wait for the kernel executor before uploads get 429")
	fl.maxMemory = byteSize(defaultMaxMemory())
	fs.Var(&fl.maxMemory, "max-memory", "most memory the runs judged at once may take together; an upload that needs more gets 413, and a run waits while others hold what it needs (default: half the machine's memory, at most 8GiB)")
	fs.Var(&fl.maxData, "max-data", "most the data directory may hold; past it the oldest finished runs nobody watches are removed (default: no bound)")
	fs.IntVar(&fl.keepRuns, "keep-runs", 0, "runs the data directory keeps; past it the oldest finished runs nobody watches are removed (0: all)")
	fs.Var(&fl.allowHosts, "allow-host", "another host name this server answers to (repeat, or comma-separate); localhost, IP addresses and the --listen host always are")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sampviz serve [flags]\n\nServes the web UI: drop a dump, watch its rows get judged live, open a row to see why it failed.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUnusable
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sampviz serve: unexpected argument %q\n", fs.Arg(0))
		return exitUnusable
	}
	if err := web.CheckListen(fl.listen, fl.token, fl.insecure); err != nil {
		fmt.Fprintf(stderr, "sampviz serve: %v.\n", err)
		return exitUnusable
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	backends, closeBackends, err := serveBackends(fl.backend, fl.kernels, fl.gpus)
	if err != nil {
		fmt.Fprintf(stderr, "sampviz serve: %v\n", err)
		return exitUnusable
	}
	defer closeBackends()

	sess := session.New(backends...)
	sess.MaxMemory = int64(fl.maxMemory)
	// One run at a time per GPU (web: one executor each); the runs judged
	// at once share --max-memory (the session reserves each one's need
	// from it, engine/session budget.go), so the process stays within it.
	limitMemory(sess.MaxMemory)
	srv, err := web.New(web.Config{
		DataDir: fl.data, Runner: sess, Token: fl.token,
		MaxUpload: int64(fl.maxUpload), Queue: fl.queue, Log: log,
		Scenarios: webScenarios(), Listen: fl.listen, AllowHosts: fl.allowHosts,
		KeepRuns: fl.keepRuns, MaxData: int64(fl.maxData),
	})
	if err != nil {
		fmt.Fprintf(stderr, "sampviz serve: %v\n", err)
		return exitUnusable
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", fl.listen)
	if err != nil {
		fmt.Fprintf(stderr, "sampviz serve: cannot listen on %s: %v\n", fl.listen, err)
		return exitUnusable
	}
	hs := &http.Server{
		Handler: srv.Handler(), ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// A request has 10 s for its headers and a minute for a small body;
		// an upload moves its own deadline on as it arrives, at least at
		// the minimum upload rate (web.Config.MinUploadRate). Answers have
		// two minutes (a websocket sets its own deadlines after the
		// upgrade), and an idle connection closes after 30 s.
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: 2 * time.Minute, IdleTimeout: 30 * time.Second,
	}

	url := "http://" + ln.Addr().String() + "/"
	if fl.token != "" {
		url += "?token=" + fl.token
	}
	d := backends[0].Device()
	fmt.Fprintf(stdout, "sampviz: open %s\n", url)
	fmt.Fprintf(stdout, "  kernels: %s backend on %s", d.Backend, d.Name)
	if d.Reason != "" {
		fmt.Fprintf(stdout, " (%s)", d.Reason)
	}
	gpus := sess.GPUs()
	if len(gpus) > 1 {
		fmt.Fprintf(stdout, "\n  gpus:    %d, one worker each; up to %d runs at once", len(gpus), len(gpus))
	}
	for _, g := range gpus {
		if g.State == engine.GPUDown {
			fmt.Fprintf(stdout, "\n  GPU %d:   down, runs go to the others until its worker starts: %s", g.Index, g.Fault)
		}
	}
	fmt.Fprintf(stdout, "\n  data:    %s\n", fl.data)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "sampviz serve: %v\n", err)
		return exitUnusable
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "sampviz: stopping")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(shutdown)
	return exitOK
}

// serveBackends opens the chosen backend (serveBackend: one worker per GPU
// of gpus), and the CPU backend beside it when the chosen one is not the
// CPU, so that a rerun can pick either. The returned function closes what
// needs closing.
func serveBackends(name, kernels string, gpus []int) ([]engine.Backend, func(), error) {
	primary, err := serveBackend(name, kernels, gpus)
	if err != nil {
		return nil, nil, err
	}
	closeAll := func() {
		if c, ok := primary.(io.Closer); ok {
			c.Close()
		}
	}
	backends := []engine.Backend{primary}
	if primary.Name() != "cpu" {
		backends = append(backends, cpu.New())
	}
	return backends, closeAll, nil
}
