//go:build !linux

package bash

import "errors"

func probeSandbox(string, string) (string, string, error) { return "", "", errors.ErrUnsupported }
