//go:build !linux

package bash

import (
	"errors"
	"log/slog"
	"os/exec"
)

// Stand-ins: Start fails before a sandbox is ever built off Linux (see supported).

func probeSandbox(string, string) (string, string, error) { return "", "", errors.ErrUnsupported }
func (*sandboxJail) attach(*exec.Cmd) error               { return errors.ErrUnsupported }
func (*sandboxJail) started(bool, *slog.Logger)           {}
