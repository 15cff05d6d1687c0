package cli

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// clearScreen moves the cursor home and clears the screen, as watch(1)
// does before each frame.
const clearScreen = "\x1b[H\x1b[2J"

// refreshOut prints the frames of -w: in place on a terminal (table and
// wide), else one after another.
type refreshOut struct {
	g       *globalOptions
	p       Printer
	inPlace bool
	shown   int // frames shown

	// In place only: the frame on screen and what its status line says.
	res     *Result
	drawn   string
	updated time.Time
	rev     int64
	problem string
}

func newRefreshOut(g *globalOptions) *refreshOut {
	table := g.Output == "table" || g.Output == "wide"
	term := g.env.IsTerminal != nil && g.env.IsTerminal(g.env.Out)
	return &refreshOut{g: g, p: g.printer(), inPlace: table && term}
}

// show prints a snapshot read after the event at revision rev (0: not
// after an event).
func (o *refreshOut) show(res Result, rev int64) error {
	defer func() { o.shown++ }()
	now := o.g.env.Now()
	if o.inPlace {
		o.updated, o.rev = now, rev
		return o.redraw(res)
	}
	if o.g.Output == "json" || o.g.Output == "yaml" {
		return o.p.Stream(res)
	}
	if o.shown > 0 {
		sep := "\n--- " + now.UTC().Format(time.RFC3339)
		if rev > 0 {
			sep += fmt.Sprintf(", after revision %d", rev)
		}
		if _, err := fmt.Fprintln(o.g.env.Out, sep); err != nil {
			return err
		}
	}
	return o.p.Print(res)
}

// redraw draws res in place if the screen would change; elsewhere it does
// nothing (a new table is printed only after a change).
func (o *refreshOut) redraw(res Result) error {
	if !o.inPlace {
		return nil
	}
	o.res = &res
	var b bytes.Buffer
	status := fmt.Sprintf("Every change; updated %s", o.updated.Local().Format(time.TimeOnly))
	if o.rev > 0 {
		status += fmt.Sprintf(" after revision %d", o.rev)
	}
	if o.problem != "" {
		status += "; " + o.problem
	}
	fmt.Fprintln(&b, escape(status))
	fmt.Fprintln(&b)
	if err := (&tablePrinter{w: &b, noHeaders: o.g.NoHeaders}).Print(res); err != nil {
		return err
	}
	if b.String() == o.drawn {
		return nil
	}
	o.drawn = b.String()
	_, err := io.WriteString(o.g.env.Out, clearScreen+o.drawn)
	return err
}

// setProblem says what is wrong with the view ("" when nothing is): in
// the status line on a terminal, else once on stderr.
func (o *refreshOut) setProblem(msg string) {
	if msg == o.problem {
		return
	}
	o.problem = msg
	if !o.inPlace {
		if msg != "" {
			fmt.Fprintf(o.g.env.ErrOut, "poolctl: %s\n", escape(msg))
		}
		return
	}
	if o.res != nil {
		_ = o.redraw(*o.res)
	}
}

// clear forgets the problem without drawing: a new frame follows.
func (o *refreshOut) clear() { o.problem = "" }

// note reports an event of the connection on stderr; on a terminal the
// status line says it instead.
func (o *refreshOut) note(msg string) {
	o.problem = ""
	if !o.inPlace {
		fmt.Fprintf(o.g.env.ErrOut, "poolctl: %s\n", msg)
	}
}
