package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcdpool/etcdpool/config"
)

// Seat states written to the seat file.
const (
	// StateWaiting: the sidecar is waiting for a seat.
	StateWaiting = "waiting"
	// StateHeld: the seat is held; the other fields describe it.
	StateHeld = "held"
	// StateReleased: the sidecar released the seat on shutdown.
	StateReleased = "released"
	// StateLost: the seat was taken away; Reason and Error say why.
	StateLost = "lost"
	// StateFailed: no seat was obtained; Error says why.
	StateFailed = "failed"
)

// SeatRecord is the sidecar's claim as written to the seat file and served
// on /seat.
type SeatRecord struct {
	// State is one of the State* constants.
	State string `json:"state"`
	// Pool is the pool claimed from.
	Pool string `json:"pool"`
	// Seat is the seat number; -1 before a seat is held.
	Seat int `json:"seat"`
	// Token is the fencing token: send it with every write made as holder.
	Token int64 `json:"token,omitempty"`
	// Lease is the claimant's lease, in hex.
	Lease string `json:"lease,omitempty"`
	// Holder is the claimant identity.
	Holder string `json:"holder,omitempty"`
	// Tenant is the tenant the seat is charged to.
	Tenant string `json:"tenant,omitempty"`
	// Instance is the ID of the instance the seat is bound to.
	Instance string `json:"instance,omitempty"`
	// Address is where the instance is reached.
	Address string `json:"address,omitempty"`
	// Labels are the instance's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Draining is true while the instance is seen draining and the seat
	// is held: finish the work on it; the seat goes at the drain's
	// timeout, with the instance. False again if the instance is made
	// ready again (coordinator.Claim.DrainState).
	Draining bool `json:"draining,omitempty"`
	// Reason is a coordinator loss reason (expired, force_released,
	// instance_gone, pool_deleted, unknown) when State is lost.
	Reason string `json:"reason,omitempty"`
	// Error is the loss or failure in words.
	Error string `json:"error,omitempty"`
	// UpdatedAt is when the record was written.
	UpdatedAt time.Time `json:"updatedAt"`
}

// Env returns the record as sourceable KEY='value' lines, keys prefixed
// ETCDPOOL_SEAT_.
func (r SeatRecord) Env() []byte {
	var b bytes.Buffer
	for _, kv := range [][2]string{
		{"STATE", r.State}, {"POOL", r.Pool}, {"NUMBER", strconv.Itoa(r.Seat)},
		{"TOKEN", strconv.FormatInt(r.Token, 10)}, {"LEASE", r.Lease}, {"HOLDER", r.Holder},
		{"TENANT", r.Tenant}, {"INSTANCE", r.Instance}, {"ADDRESS", r.Address},
		{"LABELS", config.FormatLabels(r.Labels)}, {"DRAINING", strconv.FormatBool(r.Draining)}, {"REASON", r.Reason}, {"ERROR", r.Error},
	} {
		fmt.Fprintf(&b, "ETCDPOOL_SEAT_%s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return b.Bytes()
}

// shellQuote quotes s for POSIX sh and for docker/systemd env files that
// accept single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "'", `'\''`) + "'"
}

// SeatFile writes a SeatRecord to a JSON file and an env file, each
// replaced atomically (temp file, fsync, rename), so that a reader sees the
// old record or the new one, never a mix.
type SeatFile struct {
	// JSONPath is the JSON file. Required.
	JSONPath string
	// EnvPath is the env file; none when empty.
	EnvPath string
}

// Write writes rec to both files, JSON first.
func (f SeatFile) Write(rec SeatRecord) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(f.JSONPath, append(b, '\n'), seatFileMode); err != nil {
		return err
	}
	if f.EnvPath == "" {
		return nil
	}
	return WriteFileAtomic(f.EnvPath, rec.Env(), seatFileMode)
}

// ReadSeatFile reads a JSON seat file.
func ReadSeatFile(path string) (SeatRecord, error) {
	var rec SeatRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return rec, err
	}
	err = json.Unmarshal(b, &rec)
	return rec, err
}

// Modes of the files the sidecar writes, before the umask: the seat and
// env files are read by the application container, which may run as
// another user; the resume state holds the lease ID and is for the sidecar
// alone.
const (
	seatFileMode  os.FileMode = 0o644
	stateFileMode os.FileMode = 0o600
)

// WriteFileAtomic replaces path with data: it writes a temp file in the
// same directory, syncs it, renames it over path and syncs the directory,
// so a reader sees the old content or the new, never a mix. The new file
// gets perm less the process umask, and never more than an existing path
// had: a mode narrowed by hand stays narrowed. The directory is created if
// missing.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agent: seat file dir: %w", err)
	}
	if fi, err := os.Stat(path); err == nil {
		perm &= fi.Mode().Perm()
	}
	tmp, err := createTemp(dir, "."+filepath.Base(path)+".tmp-", perm)
	if err != nil {
		return fmt.Errorf("agent: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err = tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("agent: write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// createTemp creates a new file named prefix + a random suffix in dir with
// perm, which the kernel reduces by the umask (os.CreateTemp always uses
// 0600, and a chmod afterwards would ignore the umask).
func createTemp(dir, prefix string, perm os.FileMode) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("agent: no free temp name in %s", dir)
}
