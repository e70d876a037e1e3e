// Command gen writes the scenario catalogue: for every scenario of
// scenarios/internal/generate, its folder under -dir with the dump and
// scenario.json. It leaves each folder's README.md, which is written by
// hand, alone, and says which folders lack one. `make scenarios` runs it
// from the repository root; running it twice writes the same bytes.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sampviz/sampviz/scenarios"
	"github.com/sampviz/sampviz/scenarios/internal/generate"
)

func main() {
	dir := flag.String("dir", "scenarios", "the scenarios folder to write into")
	flag.Parse()
	if err := write(*dir); err != nil {
		fmt.Fprintf(os.Stderr, "scenarios/gen: %v\n", err)
		os.Exit(1)
	}
}

// file is one file of a scenario folder.
type file struct {
	name string
	data []byte
}

// write generates every scenario into dir, rewriting only files whose
// content changed.
func write(dir string) error {
	folders, err := generate.All()
	if err != nil {
		return err
	}
	for _, f := range folders {
		sub := filepath.Join(dir, f.Config.Name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", sub, err)
		}
		files := []file{{f.Config.Dump, f.Dump}, {scenarios.ConfigFile, f.ConfigJSON}}
		if f.Config.Diff != nil {
			files = append(files, file{f.Config.Diff.After, f.After})
		}
		for _, file := range files {
			path := filepath.Join(sub, file.name)
			old, err := os.ReadFile(path)
			if err == nil && bytes.Equal(old, file.data) {
				continue
			}
			if err := os.WriteFile(path, file.data, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
			fmt.Printf("wrote %s (%d bytes)\n", path, len(file.data))
		}
		if _, err := os.Stat(filepath.Join(sub, scenarios.ReadmeFile)); err != nil {
			fmt.Printf("%s has no %s yet: write one by hand\n", sub, scenarios.ReadmeFile)
		}
	}
	return nil
}
