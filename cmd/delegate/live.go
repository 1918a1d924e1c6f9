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

// writeRoleTable writes the per-role account of run and process: calls,
// errors, retries, tokens and dollars, and with callTime the summed call
// time.
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
