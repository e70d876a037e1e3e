//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// inOwnGroup starts cmd in a process group of its own, which killGroup
// ends whole.
func inOwnGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills cmd's process group, the processes it started with it
// (python's compile workers), and never any other.
func killGroup(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Process.Kill()
}
