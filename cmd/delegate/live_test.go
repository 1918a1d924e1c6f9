package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
)

// The questions route's scripted strong model delegates. Also what the
// view must say of them and of the weak model's replies.
var delegationLines = []string{
	"asked: What is 6*7?",
	"delegates: What is 6*7?",
	"delegates: What is 40+2?",
	"asked: What is 40+2?",
	`answered: 42  ← It is 42. ⏎ Final answer: \boxed{42}`,
}

func TestRunShowsDelegatedQuestionsAndAnswers(t *testing.T) {
	srv := newTestServer(t)
	cfg := writeTestConfig(t, srv.URL)
	out, err := execute(t, testEnv, "run", "--config", cfg, "--strategy", "route", "What is 6*7?")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	for _, want := range delegationLines {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("output to a non-terminal has escape codes:\n%q", out)
	}
}

var escapes = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

func TestLiveViewModes(t *testing.T) {
	tests := []struct {
		name      string
		tty       bool
		width     int
		wantCodes []string // escape codes that must appear
	}{
		{"plain", false, 0, nil},
		{"terminal", true, 60, []string{sgrGreen + "✓" + sgrReset, sgrDim + "asked: ", "\r\x1b[J"}},
		{"narrow terminal", true, 30, []string{sgrCyan + "▪" + sgrReset}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			runRoute(t, newLiveView(&buf, tt.tty, tt.width, 40))
			out := buf.String()
			if !tt.tty && strings.Contains(out, "\x1b") {
				t.Fatalf("plain view has escape codes:\n%q", out)
			}
			for _, code := range tt.wantCodes {
				if !strings.Contains(out, code) {
					t.Errorf("terminal view lacks %q:\n%q", code, out)
				}
			}
			text := escapes.ReplaceAllString(out, "")
			for _, want := range delegationLines {
				if tt.width >= 60 || !tt.tty {
					if !strings.Contains(text, want) {
						t.Errorf("view lacks %q:\n%s", want, text)
					}
				}
			}
			if !tt.tty {
				return
			}
			for line := range strings.SplitSeq(strings.ReplaceAll(text, "\r", ""), "\n") {
				if got := runewidth.StringWidth(line); got > tt.width {
					t.Errorf("line %q is %d columns wide, want at most %d", line, got, tt.width)
				}
			}
		})
	}
}

// runRoute runs route with scripted models, its events shown by v.
func runRoute(t *testing.T, v *liveView) {
	t.Helper()
	roles := strategy.Roles{
		Strong: delegate.Agent{Role: "strong", Model: modeltest.New("big", scripted)},
		Weak:   delegate.Agent{Role: "weak", Model: modeltest.New("small", scripted)},
	}
	s, err := strategy.New(strategy.NameRoute, roles, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan delegate.Event, 256)
	done := make(chan struct{})
	go v.run(events, done)
	_, err = s.Run(context.Background(), "What is 6*7?", events)
	close(events)
	<-done
	if err != nil {
		t.Fatalf("route: %v", err)
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a  b", "a b"},
		{" a\n\nb \r\n c\t", "a ⏎ b ⏎ c"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A running call is drawn, then redrawn in place when it finishes. The
// cursor goes back up over the lines of the running region.
func TestLiveViewRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	v := newLiveView(&buf, true, 80, 24)
	turn := delegate.Event{Kind: delegate.EventStart, ID: 1, Depth: 1, Name: "turn 1"}
	call := delegate.Event{Kind: delegate.EventStart, ID: 2, ParentID: 1, Depth: 2, Name: "strong", Role: "strong", Model: "big",
		Prompt: delegate.User("What is 6*7?"), Time: time.Now()}
	steps := []struct {
		ev   delegate.Event
		want string // what this draw must write
	}{
		{turn, "\r\x1b[J" + sgrBold + "▸" + sgrReset + " turn 1\n"},
		{call, sgrYellow + "…" + sgrReset + " strong  [strong big]  "},
		{finished(call, "\\boxed{42}"), "\x1b[3A\r\x1b[J"}, // the turn, the call and its question
		{finished(turn, ""), "\x1b[4A\r\x1b[J" + sgrCyan + "▪" + sgrReset + " turn 1"},
	}
	for i, s := range steps {
		buf.Reset()
		v.add(s.ev)
		v.draw(false)
		if !strings.Contains(buf.String(), s.want) {
			t.Errorf("draw %d wrote %q, want it to hold %q", i, buf.String(), s.want)
		}
	}
	if v.drawn != 0 || v.done != 4 {
		t.Errorf("after the last finish: %d lines drawn, %d done; want 0 and 4", v.drawn, v.done)
	}
	buf.Reset()
	v.draw(true)
	if got := buf.String(); got != "\r\x1b[J" {
		t.Errorf("final draw of a finished tree wrote %q, want only the clear", got)
	}
}

// finished returns the finish event of a started one, with reply text for
// a call.
func finished(ev delegate.Event, reply string) delegate.Event {
	ev.Kind = delegate.EventFinish
	if ev.Model != "" {
		out := delegate.Assistant(reply)
		ev.Output = &out
	}
	return ev
}
