package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestTemplateHash checks that the hash follows what a template renders.
// Equal renders share it and any changed id changes it. A template without
// tools is hashed on plain turns; one that renders nothing is an error.
func TestTemplateHash(t *testing.T) {
	render := func(shift int, tools bool) func([]delegate.Message, []delegate.Tool) ([]int, error) {
		return func(msgs []delegate.Message, ts []delegate.Tool) ([]int, error) {
			if len(ts) > 0 && !tools {
				return nil, errors.New("no tools section")
			}
			var ids []int
			for _, m := range msgs {
				for _, c := range m.Content {
					ids = append(ids, int(c)+shift)
				}
			}
			return ids, nil
		}
	}
	hash := func(r func([]delegate.Message, []delegate.Tool) ([]int, error)) string {
		t.Helper()
		h, err := gateway.TemplateHash(r)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b, c, plain := hash(render(0, true)), hash(render(0, true)), hash(render(1, true)), hash(render(0, false))
	if a != b || a == c || a == plain || !strings.HasPrefix(a, "sha256:") {
		t.Errorf("hashes %s %s %s %s: want the first two equal and the rest different", a, b, c, plain)
	}
	if _, err := gateway.TemplateHash(func([]delegate.Message, []delegate.Tool) ([]int, error) { return nil, errors.New("broken") }); err == nil {
		t.Error("a template that renders nothing: got nil error")
	}
	if gateway.BuiltinTemplateHash() == "" {
		t.Error("the builtin template has no hash")
	}
}
