package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/strategy"
)

// The questions route's scripted strong model delegates, and what the
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
		{"terminal", true, 60, []string{sgrGreen + "✓" + sgrReset, sgrDim + "asked: ", "\x1b[J", "A\r\x1b[J"}},
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
