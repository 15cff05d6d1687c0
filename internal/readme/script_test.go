package readme

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// The script's lines:
//
//	# comment                       ignored
//	:: NAME                         starts README block NAME (shown)
//	$ poolctl ARGS                  runs poolctl now; the lines after it are
//	                                its expected output, "(exit N)" its code
//	= JOB                           shows background JOB as "$ its command"
//	                                and its output once it has exited
//	=~ JOB                          shows only JOB's output, compared as a
//	                                set of lines (two processes write it)
//	> bg JOB poolctl ARGS           starts JOB in the background (hidden)
//	> stop JOB                      interrupts JOB, as Ctrl-C does (hidden)
//	> wait JOB                      waits until JOB exits (hidden)
//	> await TEXT :: poolctl ARGS    reruns poolctl until its output has TEXT
//	> until JOB TEXT :: poolctl ARGS  runs poolctl until JOB's output has
//	                                TEXT (a watch shows it is watching)
//	> let VAR REGEXP :: poolctl ARGS  sets VAR to REGEXP's group 1 in the output
//	> run poolctl ARGS              runs poolctl, output unchecked (hidden)
//
// In commands and outputs, {VAR:shown} is VAR's value when replayed and
// "shown" in the README.
type step struct {
	line   int
	kind   string // "$", "=", "=~", "bg", "stop", "wait", "await", "until", "let", "run"
	block  string // README block, for shown steps
	job    string
	text   string // await's text, let's regexp
	args   string // the poolctl command line, without "poolctl "
	output []string
	exit   int
}

var exitLine = regexp.MustCompile(`^\(exit (\d+)\)$`)

func parseScript(path string) ([]step, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var steps []step
	block := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		var s step
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
			if l == "" && len(steps) > 0 {
				steps[len(steps)-1].output = append(steps[len(steps)-1].output, "")
			}
			continue
		case strings.HasPrefix(l, ":: "):
			block = strings.TrimPrefix(l, ":: ")
			continue
		case strings.HasPrefix(l, "$ poolctl "):
			s = step{kind: "$", args: strings.TrimPrefix(l, "$ poolctl ")}
		case strings.HasPrefix(l, "=~ "):
			s = step{kind: "=~", job: strings.TrimPrefix(l, "=~ ")}
		case strings.HasPrefix(l, "= "):
			s = step{kind: "=", job: strings.TrimPrefix(l, "= ")}
		case strings.HasPrefix(l, "> "):
			s, err = parseHidden(strings.TrimPrefix(l, "> "))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
		case len(steps) > 0 && steps[len(steps)-1].block != "":
			last := &steps[len(steps)-1]
			if m := exitLine.FindStringSubmatch(l); m != nil {
				fmt.Sscan(m[1], &last.exit)
			} else {
				last.output = append(last.output, l)
			}
			continue
		default:
			return nil, fmt.Errorf("%s:%d: output outside a shown step: %q", path, n, l)
		}
		s.line = n
		if s.kind == "$" || s.kind == "=" || s.kind == "=~" {
			if block == "" {
				return nil, fmt.Errorf("%s:%d: shown step before any \":: NAME\"", path, n)
			}
			s.block = block
		}
		steps = append(steps, s)
	}
	for i := range steps {
		steps[i].output = trimBlank(steps[i].output)
	}
	return steps, sc.Err()
}

func parseHidden(l string) (step, error) {
	verb, rest, _ := strings.Cut(l, " ")
	cmdOf := func(s string) (string, error) {
		if !strings.HasPrefix(s, "poolctl ") {
			return "", fmt.Errorf("%s: want a poolctl command, got %q", verb, s)
		}
		return strings.TrimPrefix(s, "poolctl "), nil
	}
	var err error
	s := step{kind: verb}
	switch verb {
	case "bg":
		var cmd string
		s.job, cmd, _ = strings.Cut(rest, " ")
		s.args, err = cmdOf(cmd)
	case "stop", "wait":
		s.job = rest
	case "await":
		var cmd string
		s.text, cmd, _ = strings.Cut(rest, " :: ")
		s.args, err = cmdOf(cmd)
	case "until":
		var def, cmd string
		def, cmd, _ = strings.Cut(rest, " :: ")
		s.job, s.text, _ = strings.Cut(def, " ")
		s.args, err = cmdOf(cmd)
	case "let":
		var def, cmd string
		def, cmd, _ = strings.Cut(rest, " :: ")
		s.job, s.text, _ = strings.Cut(def, " ")
		s.args, err = cmdOf(cmd)
	case "run":
		s.args, err = cmdOf(rest)
	default:
		err = fmt.Errorf("unknown hidden step %q", verb)
	}
	return s, err
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

var varRef = regexp.MustCompile(`\{(\w+):([^}]*)\}`)

// shown is s as the README prints it: variables as their shown values.
func shown(s string) string { return varRef.ReplaceAllString(s, "$2") }

// bind replaces variables with their replayed values.
func bind(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		return vars[varRef.FindStringSubmatch(m)[1]]
	})
}

// blocks renders the shown steps, block by block, as README prints them.
func blocks(steps []step, jobs map[string]string) map[string]string {
	out := map[string][]string{}
	for _, s := range steps {
		if s.block == "" {
			continue
		}
		var lines []string
		if len(out[s.block]) > 0 {
			lines = append(lines, "")
		}
		switch s.kind {
		case "$":
			lines = append(lines, "$ poolctl "+shown(s.args))
		case "=":
			lines = append(lines, "$ poolctl "+shown(jobs[s.job]))
		}
		for _, o := range s.output {
			lines = append(lines, shown(o))
		}
		if s.exit != 0 {
			lines = append(lines, fmt.Sprintf("(exit %d)", s.exit))
		}
		out[s.block] = append(out[s.block], lines...)
	}
	r := map[string]string{}
	for b, lines := range out {
		r[b] = strings.Join(lines, "\n") + "\n"
	}
	return r
}
