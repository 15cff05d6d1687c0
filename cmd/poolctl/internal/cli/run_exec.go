package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
)

// lookCommand resolves run's command in PATH like a shell would, and
// classifies a failure as the shell does: 127 if there is no such command,
// 126 if there is one that cannot be executed.
func lookCommand(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", execError(name, err)
	}
	return path, nil
}

// startError classifies a command that could not be started.
func startError(name string, err error) error {
	return execError(name, fmt.Errorf("start: %w", err))
}

// execError is err marked 127 (not found) or 126 (cannot execute).
func execError(name string, err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		err = ee.Err // its message repeats the name
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return classify(errCommandNotFound, fmt.Errorf("command %q: not found: %w", name, err))
	}
	return classify(errCannotExec, fmt.Errorf("command %q: cannot execute: %w", name, err))
}
