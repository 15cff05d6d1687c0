package cli

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroup is a cgroup v2 the guard made for the command, a child of the
// guard's own cgroup.
type cgroup struct {
	dir string
	fd  int // the directory, open for CLONE_INTO_CGROUP
}

// newCgroup makes the command's cgroup, or returns nil where cgroup v2 is
// not mounted, not writable, or too old to have cgroup.kill (Linux < 5.14).
func newCgroup() *cgroup {
	mount, root, ok := cgroup2Mount()
	if !ok {
		return nil
	}
	own, ok := ownCgroup()
	if !ok || !strings.HasPrefix(own, root) {
		return nil
	}
	dir := filepath.Join(mount, strings.TrimPrefix(own, root), fmt.Sprintf("poolctl-run-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil
	}
	cg := &cgroup{dir: dir, fd: -1}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		cg.remove()
		return nil
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		cg.remove()
		return nil
	}
	cg.fd = fd
	return cg
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted, and which
// of its cgroups is that mount's root.
func cgroup2Mount() (mount, root string, ok bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		pre, post, found := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if found && len(fields) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return fields[4], fields[3], true
		}
	}
	return "", "", false
}

// ownCgroup is this process's cgroup v2 path, from /proc/self/cgroup.
func ownCgroup() (string, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, true
		}
	}
	return "", false
}

// kill kills every process in the cgroup, atomically with respect to forks.
func (cg *cgroup) kill() error {
	return os.WriteFile(filepath.Join(cg.dir, "cgroup.kill"), []byte("1"), 0)
}

// procs lists the cgroup's processes.
func (cg *cgroup) procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// remove deletes the (empty) cgroup. The kernel may report it busy for a
// moment after its last process was reaped, so it retries for up to a
// second. A nil cgroup does nothing.
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	if cg.fd >= 0 {
		_ = syscall.Close(cg.fd)
		cg.fd = -1
	}
	for i := 0; i < 100; i++ {
		err := syscall.Rmdir(cg.dir)
		if err == nil || err == syscall.ENOENT || err != syscall.EBUSY {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
