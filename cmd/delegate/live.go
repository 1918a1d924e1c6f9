package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/delegatelab/delegate"
)

// liveTree prints a run's calls as they start and finish, indented by
// depth, so the delegation unfolds on the terminal. It reads events until
// the channel closes; the run never waits for it (the recorder drops and
// counts events when the channel is full).
func liveTree(w io.Writer, events <-chan delegate.Event, done chan<- struct{}) {
	defer close(done)
	for ev := range events {
		indent := strings.Repeat("  ", max(ev.Depth-1, 0))
		who := ""
		if ev.Model != "" {
			who = fmt.Sprintf("  [%s %s]", ev.Role, ev.Model)
		}
		switch {
		case ev.Kind == delegate.EventStart && ev.Model == "":
			fmt.Fprintf(w, "%s▸ %s\n", indent, ev.Name)
		case ev.Kind == delegate.EventStart:
			fmt.Fprintf(w, "%s… %s%s\n", indent, ev.Name, who)
		case ev.Model == "":
			fmt.Fprintf(w, "%s▪ %s  %s\n", indent, ev.Name, fmtDuration(ev.Latency))
		default:
			mark := "✓"
			if ev.Error != "" {
				mark = "✗"
			}
			fmt.Fprintf(w, "%s%s %s%s  %s  %s  %s%s\n", indent, mark, ev.Name, who,
				fmtTokens(ev.Usage), fmtDollars(ev.Cost), fmtDuration(ev.Latency), callNotes(ev))
		}
	}
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "role\tcalls\terrors\tretries\tprompt tok\tcached tok\tcompletion tok\tdollars\tcall time\t")
	roles := make([]string, 0, len(t.Roles))
	for r := range t.Roles {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	row := func(name string, x delegate.Totals) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", name, x.Calls, x.Errors, x.Retries,
			x.Usage.PromptTokens, x.Usage.CachedTokens, x.Usage.CompletionTokens, fmtDollars(x.Cost), fmtDuration(x.Latency))
	}
	for _, r := range roles {
		row(r, t.Roles[r])
	}
	row("total", t.Total)
	if err := tw.Flush(); err != nil {
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
