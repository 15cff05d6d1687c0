// Package cli implements poolctl. Every verb lives in its own file and
// follows the kubectl Options pattern (Complete, Validate, Run) against an
// injected Env, so that the whole CLI runs in-process in tests. Errors are
// mapped to exit codes in exactly one place, ExitCode in exitcode.go.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"
)

// Env is everything poolctl takes from its process. Tests build one with
// buffers, a fixed clock and a fake signal source.
type Env struct {
	// In is standard input, passed to the command of `run`.
	In io.Reader
	// Out is standard output: results go here.
	Out io.Writer
	// ErrOut is standard error: the one-line error message goes here.
	ErrOut io.Writer
	// Getenv reads an environment variable (os.Getenv).
	Getenv func(string) string
	// Environ is the environment passed on to the command of `run`
	// (os.Environ).
	Environ func() []string
	// Now is the clock used for ages (time.Now).
	Now func() time.Time
	// Notify and StopNotify subscribe to process signals (signal.Notify
	// and signal.Stop).
	Notify     func(c chan<- os.Signal, sig ...os.Signal)
	StopNotify func(c chan<- os.Signal)
	// ReadPassword prompts on ErrOut and reads a password without echo. It
	// fails when standard input is not a terminal.
	ReadPassword func(prompt string) (string, error)
	// IsTerminal reports whether w is a terminal; -w redraws in place on
	// one. Nil means never (tests, pipes).
	IsTerminal func(w io.Writer) bool
}

// SystemEnv returns the Env of the running process.
func SystemEnv() *Env {
	return &Env{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		Getenv: os.Getenv, Environ: os.Environ, Now: time.Now,
		Notify: signal.Notify, StopNotify: signal.Stop,
		ReadPassword: readTerminalPassword, IsTerminal: isTerminal,
	}
}

// isTerminal reports whether w is a file open on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func readTerminalPassword(prompt string) (string, error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", errors.New("standard input is not a terminal")
	}
	fmt.Fprint(os.Stderr, prompt)
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(os.Stderr)
	return string(b), err
}

// Main runs poolctl with args (without the program name) and returns the
// exit code. It never calls os.Exit. On failure it prints exactly one line,
// "poolctl: <message>", on env.ErrOut.
func Main(args []string, env *Env) int {
	if len(args) > 0 && args[0] == guardArg {
		return runGuard(args[1:]) // run's guard process (guard_linux.go)
	}
	sigs := newSignalRouter(env)
	defer sigs.stop()
	root := newRootCommand(env, sigs)
	root.SetArgs(args)
	err := root.ExecuteContext(sigs.ctx)
	if err == nil {
		return ExitOK
	}
	if !errors.Is(err, errRan) {
		err = classify(errUsage, err) // cobra's own: unknown command or flag
	}
	code := ExitCode(err)
	if !errors.Is(err, errSilent) {
		fmt.Fprintf(env.ErrOut, "poolctl: %s\n", Message(err))
	}
	return code
}

// Message renders err as one line without the library's package prefixes.
func Message(err error) string {
	msg := strings.ReplaceAll(err.Error(), "coordinator: ", "")
	msg = strings.ReplaceAll(msg, "etcdserver: ", "")
	return escape(strings.Join(strings.Fields(msg), " "))
}

// signalRouter turns SIGINT, SIGTERM and SIGHUP into a cancelled context,
// unless a handler has taken them over (run forwards them to its command).
type signalRouter struct {
	ctx    context.Context // cancelled by the first signal nobody handles
	cancel context.CancelCauseFunc
	env    *Env
	ch     chan os.Signal
	done   chan struct{}

	mu      sync.Mutex
	handler func(os.Signal) // nil: cancel ctx
}

// errInterrupted is matched by the cause of a context a signal cancelled.
var errInterrupted = errors.New("interrupted")

// interruptError is that cause; it remembers the signal.
type interruptError struct{ sig os.Signal }

func (e interruptError) Error() string {
	names := map[os.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}
	if n, ok := names[e.sig]; ok {
		return "interrupted by " + n
	}
	return fmt.Sprintf("interrupted by %v", e.sig)
}
func (e interruptError) Unwrap() error { return errInterrupted }

func newSignalRouter(env *Env) *signalRouter {
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &signalRouter{ctx: ctx, cancel: cancel, env: env, ch: make(chan os.Signal, 4), done: make(chan struct{})}
	env.Notify(r.ch, termSignals...)
	go r.loop()
	return r
}

func (r *signalRouter) loop() {
	for {
		select {
		case <-r.done:
			return
		case sig := <-r.ch:
			r.mu.Lock()
			h := r.handler
			r.mu.Unlock()
			if h == nil {
				r.cancel(interruptError{sig: sig})
				continue
			}
			h(sig)
		}
	}
}

// take routes signals to h until the returned function is called.
func (r *signalRouter) take(h func(os.Signal)) (restore func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.handler
	r.handler = h
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.handler = prev
	}
}

func (r *signalRouter) stop() {
	r.env.StopNotify(r.ch)
	close(r.done)
	r.cancel(nil)
}
