//go:build !external_scenarios

package scenarios

import "embed"

// embedded is the catalogue compiled into the binary.
//
//go:embed */scenario.json */README.md */*.safetensors
var embedded embed.FS
