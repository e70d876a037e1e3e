//go:build !unix

package main

import "os/exec"

// inOwnGroup does nothing where there are no process groups.
func inOwnGroup(*exec.Cmd) {}

// killGroup kills cmd's process; where there are no process groups the
// processes it started live on.
func killGroup(cmd *exec.Cmd) {
	cmd.Process.Kill()
}
