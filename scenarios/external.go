//go:build external_scenarios

package scenarios

import (
	"io/fs"
	"os"
)

// embedded is, in a build for the GPU machine (make gpu-bundle), the
// scenarios folder of the working tree beside the binary, or
// $SAMPVIZ_SCENARIOS: the binaries that travel there stay small, and the
// tree they run in holds the catalogue anyway.
var embedded = func() fs.ReadFileFS {
	dir := os.Getenv("SAMPVIZ_SCENARIOS")
	if dir == "" {
		dir = "scenarios"
	}
	return os.DirFS(dir).(fs.ReadFileFS)
}()
