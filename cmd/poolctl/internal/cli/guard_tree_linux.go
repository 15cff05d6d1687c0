package cli

import (
	"bytes"
	"os"
	"strconv"
)

// descendants lists every live process below root, found by walking the
// parent links in /proc. Zombies are left out: they are already dead and
// only wait to be reaped.
func descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := liveParent(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	for todo := children[root]; len(todo) > 0; {
		pid := todo[len(todo)-1]
		todo = append(todo[:len(todo)-1], children[pid]...)
		out = append(out, pid)
	}
	return out
}

// liveParent reads a process's parent from /proc/PID/stat; ok is false for
// a process that exited meanwhile or is a zombie.
func liveParent(pid int) (ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...; comm may contain spaces and ')'.
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 2 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return ppid, err == nil
}
