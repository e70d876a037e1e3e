package main

import (
	"fmt"
	"os"

	"github.com/sampviz/sampviz/engine/cuda"
)

func init() {
	commands["worker"] = command{
		summary: "serve the CUDA kernels to a sampviz process (internal; started by the server)",
		run:     runWorker,
		hidden:  true,
	}
}

// runWorker is `sampviz worker`: the CUDA backend's worker process. It takes
// no flags: its parent hands it its pipes and shared memory as file
// descriptors 3 to 5 and names the kernel library in its first request.
func runWorker(args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(os.Stderr, "sampviz worker: takes no arguments; the server starts it")
		return exitUnusable
	}
	return cuda.WorkerMain()
}
