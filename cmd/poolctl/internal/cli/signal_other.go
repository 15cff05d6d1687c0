//go:build !unix

package cli

// completeDrainSignal refuses --drain-signal: there are no signals to send
// here (and run is not supported).
func (o *runOptions) completeDrainSignal() error {
	if o.DrainSignal != "" {
		return usageError("--drain-signal: not supported on this platform")
	}
	return nil
}

// refuseSuspend does nothing: there is no job control here.
func (o *runOptions) refuseSuspend() (restore func()) { return func() {} }
