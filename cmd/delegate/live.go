package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/mattn/go-runewidth"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/strategy"
)

// plainWidth is the width detail lines are cut to when the output is not
// a terminal.
const plainWidth = 160

// ANSI codes of the terminal view.
const (
	sgrReset  = "\x1b[0m"
	sgrBold   = "\x1b[1m"
	sgrDim    = "\x1b[2m"
	sgrRed    = "\x1b[31m"
	sgrGreen  = "\x1b[32m"
	sgrYellow = "\x1b[33m"
	sgrCyan   = "\x1b[36m"
)

// liveView shows a run's calls as they start and finish, with what each
// was asked and answered. Calls are indented by depth; under a call come
// the questions it delegated and the replies it got. On a terminal it
// colours the marks and redraws running calls in place. Elsewhere it
// appends plain lines with no escape codes. It reads events until the
// channel closes. The run never waits for it: the recorder drops and
// counts the events of a full channel. Log records written to the same
// terminal while it redraws may leave a stale line above the tree.
type liveView struct {
	w      io.Writer
	tty    bool
	width  int // columns a line is cut to
	height int // terminal rows; the redrawn region stays below this

	nodes map[int]*liveNode
	top   []*liveNode // the root's children, in ID order
	done  int         // terminal: lines printed for good
	drawn int         // terminal: lines of the redrawn region on screen
}

// liveNode is one node of the run as the view knows it.
type liveNode struct {
	ev       delegate.Event // the latest event: start, then finish
	finished bool
	children []*liveNode
}

// viewLine is one line of the view before it is written.
type viewLine struct {
	indent int
	mark   string // "" on a detail line
	colour string // the mark's colour on a terminal
	text   string
	open   bool // its node is still running
}

func newLiveView(w io.Writer, tty bool, width, height int) *liveView {
	if width <= 0 {
		width = plainWidth
	}
	if height <= 0 {
		height = 24
	}
	return &liveView{w: w, tty: tty, width: width, height: height, nodes: map[int]*liveNode{}}
}

// run shows events until the channel closes, then closes done. On a
// terminal it redraws at most every tick, and every tick while calls run
// so that their times move.
func (v *liveView) run(events <-chan delegate.Event, done chan<- struct{}) {
	defer close(done)
	if !v.tty {
		for ev := range events {
			v.print(ev)
		}
		return
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				v.draw(true)
				return
			}
			v.add(ev)
		drain:
			for {
				select {
				case ev, ok := <-events:
					if !ok {
						v.draw(true)
						return
					}
					v.add(ev)
				default:
					break drain
				}
			}
			v.draw(false)
		case <-tick.C:
			v.draw(false)
		}
	}
}

// print appends the lines of one event: plain output.
func (v *liveView) print(ev delegate.Event) {
	n := &liveNode{ev: ev, finished: ev.Kind == delegate.EventFinish}
	for _, l := range n.lines(max(ev.Depth-1, 0), time.Time{}) {
		fmt.Fprintln(v.w, v.format(l))
	}
}

// add records an event in the tree. A node whose start event was dropped
// joins at its finish; one whose parent is unknown joins the top.
func (v *liveView) add(ev delegate.Event) {
	n, ok := v.nodes[ev.ID]
	if !ok {
		n = &liveNode{}
		v.nodes[ev.ID] = n
		if p, ok := v.nodes[ev.ParentID]; ok && ev.ParentID != 0 {
			p.children = append(p.children, n)
		} else {
			v.top = append(v.top, n)
		}
	}
	n.ev = ev
	n.finished = ev.Kind == delegate.EventFinish
}

// draw redraws the lines below those printed for good: the region from
// the first running node on. Lines above it never change, since new
// nodes join running ones. A region taller than the terminal loses its
// top lines as they are; with final set every line is printed for good.
func (v *liveView) draw(final bool) {
	var lines []viewLine
	now := time.Now()
	var walk func(n *liveNode, indent int)
	walk = func(n *liveNode, indent int) {
		lines = append(lines, n.lines(indent, now)...)
		for _, c := range n.children {
			walk(c, indent+1)
		}
	}
	for _, n := range v.top {
		walk(n, 0)
	}
	keep := len(lines)
	for i, l := range lines {
		if l.open {
			keep = i
			break
		}
	}
	if final {
		keep = len(lines)
	}
	keep = max(keep, v.done, len(lines)-max(v.height-2, 1))
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.drawn)
	}
	b.WriteString("\r\x1b[J")
	for _, l := range lines[min(v.done, len(lines)):] {
		b.WriteString(v.format(l))
		b.WriteByte('\n')
	}
	// A failed write is a terminal gone; the run goes on without it.
	_, _ = io.WriteString(v.w, b.String())
	v.done, v.drawn = keep, len(lines)-keep
}

// format writes a line, cut to the width, coloured on a terminal.
func (v *liveView) format(l viewLine) string {
	indent := strings.Repeat("  ", l.indent)
	if l.mark == "" {
		indent += "    "
	}
	room := v.width - runewidth.StringWidth(indent)
	if l.mark != "" {
		room -= runewidth.StringWidth(l.mark) + 1
	}
	text := l.text
	if v.tty || l.mark == "" {
		text = runewidth.Truncate(text, max(room, 10), "…")
	}
	switch {
	case !v.tty && l.mark == "":
		return indent + text
	case !v.tty:
		return indent + l.mark + " " + text
	case l.mark == "":
		return indent + sgrDim + text + sgrReset
	}
	return indent + l.colour + l.mark + sgrReset + " " + text
}

// lines returns the node's own lines: its head line and, for a call, what
// it was asked and answered. With now set (a redrawn view), a running
// call shows its time so far and its question.
func (n *liveNode) lines(indent int, now time.Time) []viewLine {
	ev := n.ev
	who := ""
	if ev.Model != "" {
		who = fmt.Sprintf("  [%s %s]", ev.Role, ev.Model)
	}
	head := viewLine{indent: indent, open: !n.finished}
	switch {
	case !n.finished && ev.Model == "":
		head.mark, head.colour, head.text = "▸", sgrBold, ev.Name
	case !n.finished && !now.IsZero():
		head.mark, head.colour = "…", sgrYellow
		head.text = ev.Name + who + "  " + fmtDuration(now.Sub(ev.Time))
	case !n.finished:
		head.mark, head.colour, head.text = "…", sgrYellow, ev.Name+who
	case ev.Model == "" && ev.Error != "":
		head.mark, head.colour = "✗", sgrRed
		head.text = fmt.Sprintf("%s  %s%s", ev.Name, fmtDuration(ev.Latency), callNotes(ev))
	case ev.Model == "":
		head.mark, head.colour, head.text = "▪", sgrCyan, ev.Name+"  "+fmtDuration(ev.Latency)
	default:
		head.mark, head.colour = "✓", sgrGreen
		if ev.Error != "" {
			head.mark, head.colour = "✗", sgrRed
		}
		head.text = fmt.Sprintf("%s%s  %s  %s  %s%s", ev.Name, who,
			fmtTokens(ev.Usage), fmtDollars(ev.Cost), fmtDuration(ev.Latency), callNotes(ev))
	}
	out := []viewLine{head}
	if ev.Model == "" || !n.finished && now.IsZero() {
		return out
	}
	for _, d := range callDetails(ev) {
		out = append(out, viewLine{indent: indent, text: d, open: !n.finished})
	}
	return out
}

// callDetails says what a finished call was asked and what it answered.
// The ask is its last message, when it is the user's. The answer is the
// tools it called, with the question of each delegate call, and its text,
// with the final answer first when one can be read from it.
func callDetails(ev delegate.Event) []string {
	var out []string
	if ev.Prompt.Role == delegate.RoleUser && strings.TrimSpace(ev.Prompt.Content) != "" {
		out = append(out, "asked: "+oneLine(ev.Prompt.Content))
	}
	if ev.Output == nil {
		return out
	}
	for _, tc := range ev.Output.ToolCalls {
		if q, err := strategy.ParseDelegateArgs(tc.Arguments); tc.Name == strategy.DelegateToolName && err == nil {
			out = append(out, "delegates: "+oneLine(q))
			continue
		}
		out = append(out, "calls "+tc.Name+": "+oneLine(tc.Arguments))
	}
	text := strings.TrimSpace(ev.Output.Content)
	switch a, ok := strategy.FinalAnswer(text); {
	case text == "":
	case ok && a != text:
		out = append(out, "answered: "+oneLine(a)+"  ← "+oneLine(text))
	default:
		out = append(out, "answered: "+oneLine(text))
	}
	return out
}

// oneLine folds a text onto one line. Each run of white space holding a
// line break becomes " ⏎ ", other runs one space.
func oneLine(s string) string {
	var b strings.Builder
	space, brk := false, false
	for _, r := range strings.TrimSpace(s) {
		if unicode.IsSpace(r) {
			space = true
			brk = brk || r == '\n' || r == '\r'
			continue
		}
		switch {
		case brk:
			b.WriteString(" ⏎ ")
		case space:
			b.WriteByte(' ')
		}
		space, brk = false, false
		b.WriteRune(r)
	}
	return b.String()
}

func callNotes(ev delegate.Event) string {
	var notes []string
	if ev.Retries > 0 {
		notes = append(notes, fmt.Sprintf("retries %d", ev.Retries))
	}
	if ev.FinishReason != "" && ev.FinishReason != "stop" && ev.FinishReason != "tool_calls" {
		notes = append(notes, "finish "+ev.FinishReason)
	}
	if ev.Error != "" {
		notes = append(notes, "error: "+ev.Error)
	}
	if len(notes) == 0 {
		return ""
	}
	return "  (" + strings.Join(notes, ", ") + ")"
}

func fmtTokens(u delegate.Usage) string {
	s := fmt.Sprintf("%d→%d tok", u.PromptTokens, u.CompletionTokens)
	if u.CachedTokens > 0 {
		s += fmt.Sprintf(" (%d cached)", u.CachedTokens)
	}
	return s
}

func fmtDollars(d float64) string { return fmt.Sprintf("$%.6f", d) }

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	default:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
}

// printTotals writes the per-role account of a trace as a table.
func printTotals(w io.Writer, t *delegate.Trace) error {
	if err := writeRoleTable(w, append(byRole(t.Roles), roleRow{"total", t.Total}), true); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "wall time %s", fmtDuration(t.Latency))
	if err == nil && t.DroppedEvents > 0 {
		_, err = fmt.Fprintf(w, "; %d live events dropped by a slow terminal", t.DroppedEvents)
	}
	if err == nil {
		_, err = fmt.Fprintln(w)
	}
	return err
}

// roleRow is one line of a role table.
type roleRow struct {
	name string
	t    delegate.Totals
}

// byRole returns one row per role, sorted by name.
func byRole(m map[string]delegate.Totals) []roleRow {
	rows := make([]roleRow, 0, len(m))
	for r, t := range m {
		rows = append(rows, roleRow{r, t})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	return rows
}

// writeRoleTable writes the per-role account of run and process. It shows
// calls, errors, retries, tokens and dollars, and with callTime the summed
// call time.
func writeRoleTable(w io.Writer, rows []roleRow, callTime bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "role\tcalls\terrors\tretries\tprompt tok\tcached tok\tcompletion tok\tdollars\t"
	if callTime {
		head += "call time\t"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		x := r.t
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t", r.name, x.Calls, x.Errors, x.Retries,
			x.Usage.PromptTokens, x.Usage.CachedTokens, x.Usage.CompletionTokens, fmtDollars(x.Cost))
		if callTime {
			fmt.Fprintf(tw, "%s\t", fmtDuration(x.Latency))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
