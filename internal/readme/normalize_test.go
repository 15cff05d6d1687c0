package readme

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The parts of an output that differ from run to run, and what they
// become in both the expected and the actual output.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "TIME"},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d{3}\b`), "TIME"},
	{regexp.MustCompile(`\btoken \d+`), "token N"},
	// Claims take a free seat at random, so that claimants spread out.
	{regexp.MustCompile(`\bseat \d+`), "seat N"},
	{regexp.MustCompile(`"seat":\d+`), `"seat":N`},
	{regexp.MustCompile(`"(token|revision)":\d+`), `"$1":N`},
	{regexp.MustCompile(`\bvm/\d+\b`), "vm/PID"}, // a default holder: host/pid
	// How poolctl run guards the command depends on the system (cgroup,
	// /proc walk, or no guard off Linux).
	{regexp.MustCompile(`^poolctl: started (\S+) \(pid .*\)$`), "poolctl: started $1 (GUARD)"},
}

// volatileColumns are the table columns whose cells differ between runs.
var volatileColumns = map[string]bool{"SEAT": true, "TOKEN": true, "AGE": true, "LEASE-TTL": true, "WAITED": true, "REVISION": true, "TIME": true}

var (
	tableHeader = regexp.MustCompile(`^[A-Z][A-Z-]*( {2,}[A-Z][A-Z-]*)+$`)
	cellSep     = regexp.MustCompile(` {2,}`)
)

// normalize rewrites output lines for comparison: volatile values become
// placeholders, and each table row becomes its cells joined by " | ", with
// the cells of volatile columns as "*" (column widths follow the values).
// The rows of a table keyed by seat are sorted, since seats are random.
// A line that another process writes concurrently (the guard's report of
// poolctl run -v races the command's own output) moves to the end.
func normalize(lines []string, host string) []string {
	out := normalizeLines(lines, host)
	var racing []string
	out = slices.DeleteFunc(out, func(l string) bool {
		if strings.HasPrefix(l, "poolctl: started ") {
			racing = append(racing, l)
			return true
		}
		return false
	})
	return append(sortSeatTables(out), racing...)
}

// sortSeatTables sorts the rows of each table whose first column is SEAT.
func sortSeatTables(lines []string) []string {
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "SEAT | ") {
			continue
		}
		j := i + 1
		for j < len(lines) && lines[j] != "" {
			j++
		}
		slices.Sort(lines[i+1 : j])
		i = j
	}
	return lines
}

func normalizeLines(lines []string, host string) []string {
	out := make([]string, 0, len(lines))
	var wild map[int]bool // volatile column indexes of the table being read
	for _, l := range lines {
		if host != "" && host != "vm" {
			l = regexp.MustCompile(`\b`+regexp.QuoteMeta(host)+`\b`).ReplaceAllString(l, "vm")
		}
		switch {
		case tableHeader.MatchString(l):
			wild = map[int]bool{}
			for i, h := range cellSep.Split(l, -1) {
				wild[i] = volatileColumns[h]
			}
			out = append(out, strings.Join(cellSep.Split(l, -1), " | "))
			continue
		case strings.TrimSpace(l) == "":
			wild = nil
		case wild != nil:
			cells := cellSep.Split(strings.TrimRight(l, " "), -1)
			for i := range cells {
				if wild[i] {
					cells[i] = "*"
				}
			}
			l = strings.Join(cells, " | ")
		}
		for _, v := range volatile {
			l = v.re.ReplaceAllString(l, v.with)
		}
		out = append(out, l)
	}
	return out
}

// splitWords splits a command line as sh does for plain words and quotes
// (no expansions): 'single' and "double" quotes group, \ escapes in double
// quotes and outside them.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0:
				i++
				cur.WriteByte(s[i])
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == ' ':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote in %q", quote, s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
