package standin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/delegatelab/delegate/strategy"
)

// BenchmarkServeHTTP measures the stand-in's own cost per request (no
// latency, no network): decode, classify, answer, encode.
func BenchmarkServeHTTP(b *testing.B) {
	routeSys, _ := strategy.DefaultPrompt("route_system")
	weakSys, _ := strategy.DefaultPrompt("weak_system")
	bodies := []struct {
		name string
		req  wireReq
	}{
		{"route_first_turn", wireReq{Messages: []wireMsg{wmsg("system", routeSys), wmsg("user", "A shop sells 20 pencils a day for 3 days. How many?")}, Tools: delegateToolDef()}},
		{"weak", wireReq{Messages: []wireMsg{wmsg("system", weakSys), wmsg("user", "Part 1 of 4: what is 123 times 45?")}}},
	}
	s, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	for _, bb := range bodies {
		body, err := json.Marshal(bb.req)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)))
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
