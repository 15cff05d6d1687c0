package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
)

// tailWindow is how much of the end of the file is read to find where to
// resume; records are well under 1 KiB and a revision has at most a few
// hundred events (etcd's --max-txn-ops).
const tailWindow = 1 << 20

// position is where a log resumes: after revision after, skipping the
// first skip events of revision after+1, which are already written.
type position struct {
	after int64
	skip  int
}

// resumePoint reads the end of f and returns where to resume, and whether
// the file ends in a partial line (a crash during a write) that must be
// terminated before appending. An empty file, or one with no record,
// resumes at the current revision (position{}).
func resumePoint(f *os.File) (position, bool, error) {
	st, err := f.Stat()
	if err != nil {
		return position{}, false, err
	}
	size := st.Size()
	if size == 0 {
		return position{}, false, nil
	}
	start := max(size-tailWindow, 0)
	buf := make([]byte, size-start)
	if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
		return position{}, false, err
	}
	partial := buf[len(buf)-1] != '\n'
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	if partial {
		lines = lines[:len(lines)-1] // the torn record is not counted
	}
	var pos position
	var last int64
	for i := len(lines) - 1; i >= 0; i-- {
		var r Record
		if json.Unmarshal(lines[i], &r) != nil || r.Revision <= 0 {
			continue
		}
		switch {
		case last == 0 && r.Type == TypeGap: // resume where the gap left off
			return position{after: r.Revision - 1}, partial, nil
		case last == 0:
			last = r.Revision
			pos = position{after: last - 1, skip: 1}
		case r.Revision == last && r.Type != TypeGap:
			pos.skip++
		default:
			return pos, partial, nil
		}
	}
	return pos, partial, nil
}
