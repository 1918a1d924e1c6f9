package local_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/local"
)

// TestChatStreamIsChat checks ChatStream against Chat on an untrained model.
// Its random tokens hit every case: special tokens, tool-call openings,
// partial UTF-8 and stop sequences. With the same seed the response is the
// same, and each choice's streamed pieces put together are a prefix of its
// final content.
func TestChatStreamIsChat(t *testing.T) {
	m := tinyModel(t, 256)
	temp := 1.0
	for seed := range int64(12) {
		req := &delegate.Request{
			Messages:    []delegate.Message{delegate.User("stream me")},
			Temperature: &temp, Seed: &seed, N: 3, MaxTokens: 40,
			Stop: []string{"ab", "\xc3\xa9t"},
		}
		want, err := m.Chat(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var pieces [3]strings.Builder
		got, err := m.ChatStream(context.Background(), req, func(i int, text string) {
			if text == "" {
				t.Errorf("seed %d choice %d: empty piece", seed, i)
			}
			pieces[i].WriteString(text)
		})
		if err != nil {
			t.Fatal(err)
		}
		want.Latency, got.Latency = 0, 0
		if !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: ChatStream response differs from Chat's:\n got %+v\nwant %+v", seed, got, want)
		}
		for i, c := range got.Choices {
			if !strings.HasPrefix(c.Message.Content, pieces[i].String()) {
				t.Errorf("seed %d choice %d: streamed %q is not a prefix of the content %q", seed, i, pieces[i].String(), c.Message.Content)
			}
		}
	}
}

// TestChatStreamCancel: cancelling the context ends ChatStream with the
// cancellation, as it ends Chat.
func TestChatStreamCancel(t *testing.T) {
	m := tinyModel(t, 256)
	ctx, cancel := context.WithCancel(context.Background())
	first := true
	_, err := m.ChatStream(ctx, &delegate.Request{Messages: []delegate.Message{delegate.User("x")}, MaxTokens: 200}, func(int, string) {
		if first {
			first = false
			cancel()
			time.Sleep(10 * time.Millisecond)
		}
	})
	if first {
		t.Fatal("nothing was streamed")
	}
	var ae *delegate.APIError
	if err != nil && (!errors.As(err, &ae) || ae.Type != delegate.ErrKindCanceled) {
		t.Errorf("err = %v, want a cancellation", err)
	}
	// err == nil: the generation ended before the cancellation reached the
	// engine, which is allowed.
}

func TestHeldBack(t *testing.T) {
	tests := []struct {
		text  string
		stops []string
		want  int
	}{
		{"hello", nil, 0},
		{"hello wo", []string{"world"}, 2},
		{"hello world", []string{"world"}, 5},
		{"hello", []string{"x", "lo!"}, 2},
		{"caf\xc3", nil, 1},
		{"caf\xc3\xa9", nil, 0},
		{"\xe2\x82", nil, 2},
		{"a\xf0\x9f\x98", nil, 3},
		{"\xf0\x9f\x98\x80", nil, 0},
		{"x\x80", nil, 0}, // a stray continuation byte never completes
		{"caf\xc3", []string{"\xc3\xa9t"}, 1},
		{"ca\xc3\xa9", []string{"\xc3\xa9t"}, 2},
	}
	for _, tt := range tests {
		if got := local.HeldBack(tt.text, tt.stops); got != tt.want {
			t.Errorf("heldBack(%q, %q) = %d, want %d", tt.text, tt.stops, got, tt.want)
		}
	}
}
