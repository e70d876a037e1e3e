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
	queue               int
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
	fs.Var(&fl.maxUpload, "max-upload", "largest dump an upload may carry (4GiB, 500MB, ...)")
	fs.IntVar(&fl.queue, "queue", web.DefaultQueue, "runs that may wait for the kernel executor before uploads get 429")
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

	backends, closeBackends, err := serveBackends(fl.backend, fl.kernels)
	if err != nil {
		fmt.Fprintf(stderr, "sampviz serve: %v\n", err)
		return exitUnusable
	}
	defer closeBackends()

	srv, err := web.New(web.Config{
		DataDir: fl.data, Runner: session.New(backends...), Token: fl.token,
		MaxUpload: int64(fl.maxUpload), Queue: fl.queue, Log: log,
		Scenarios: webScenarios(),
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
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

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

// serveBackends opens the chosen backend, and the CPU backend beside it
// when the chosen one is not the CPU, so that a rerun can pick either. The
// returned function closes what needs closing.
func serveBackends(name, kernels string) ([]engine.Backend, func(), error) {
	primary, err := openBackend(name, kernels)
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
