package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestByteSizeFlag(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4GiB", 4 << 30, true},
		{"512MiB", 512 << 20, true},
		{"100MB", 100e6, true},
		{"1.5G", 3 << 29, true},
		{"123456", 123456, true},
		{"0", 0, false},
		{"-1GiB", 0, false},
		{"lots", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b byteSize
			err := b.Set(tt.in)
			if (err == nil) != tt.ok || tt.ok && int64(b) != tt.want {
				t.Errorf("Set(%q) = %d, %v; want %d, ok %v", tt.in, b, err, tt.want, tt.ok)
			}
		})
	}
}

func TestServeRefusesOpenListenWithoutToken(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"all interfaces", []string{"--listen", "0.0.0.0:0", "--data", t.TempDir()}, "can be reached from other machines: give --token"},
		{"a stray argument", []string{"dump.safetensors"}, `unexpected argument "dump.safetensors"`},
		{"a bad size", []string{"--max-upload", "lots"}, "is not a size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := runServe(tt.args, &stdout, &stderr); code != exitUnusable {
				t.Errorf("exit %d, want %d", code, exitUnusable)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q before refusing", stdout.String())
			}
		})
	}
}
