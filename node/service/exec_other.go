//go:build !unix

package service

import (
	"errors"
	"time"
)

func newExecRunner(path string, args, env []string, dir string, grace time.Duration) (runner, error) {
	return nil, errors.New("exec services need a unix-like system (process groups)")
}
