package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/store"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// TestSessionsExpireInTurn checks that each session expires at its own
// time, though POST /sessions looks at the sessions only once the
// earliest expiry has passed. Sessions opened between two such looks,
// and one whose reward was refused, expire too.
func TestSessionsExpireInTurn(t *testing.T) {
	model := modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("ok"), nil
	})
	var mu sync.Mutex
	var expired []string // the groups of the sessions seen expiring
	c := &clock{}
	cfg := gateway.DefaultConfig()
	cfg.Dir, cfg.TTL, cfg.Now = t.TempDir(), time.Minute, c.now
	cfg.Ended = func(fin *gateway.Finished, exp bool) {
		if exp {
			mu.Lock()
			expired = append(expired, fin.Group)
			mu.Unlock()
		}
	}
	gw, err := gateway.Open(context.Background(), cfg, nil, model)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw)
	defer srv.Close()
	post := func(path, body string) (int, []byte) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	open := func(group string) string {
		t.Helper()
		status, b := post("/sessions", `{"group":"`+group+`"}`)
		var cr gateway.CreateResponse
		if err := json.Unmarshal(b, &cr); err != nil || status != http.StatusOK {
			t.Fatalf("open %s: %d %s", group, status, b)
		}
		return cr.SessionID
	}

	refused := open("b") // expires at 1m; refused its reward below
	// No verifier: a reward asked to be verified is refused, and the
	// session goes on.
	if status, b := post("/sessions/"+refused+"/reward", `{}`); status != http.StatusUnprocessableEntity {
		t.Fatalf("verified reward without a verifier: %d %s, want 422", status, b)
	}
	for _, step := range []struct {
		after time.Duration // since the last step
		open  string
		want  []string // expired so far
	}{
		{20 * time.Second, "c", nil},                // c expires at 1m20s
		{50 * time.Second, "d", []string{"b"}},      // 1m10s; d expires at 2m10s
		{20 * time.Second, "e", []string{"b", "c"}}, // 1m30s; e expires at 2m30s
		{30 * time.Second, "f", []string{"b", "c"}}, // 2m
		{20 * time.Second, "g", []string{"b", "c", "d"}},
	} {
		c.advance(step.after)
		open(step.open)
		mu.Lock()
		got := slices.Clone(expired)
		mu.Unlock()
		if !slices.Equal(got, step.want) {
			t.Fatalf("after opening %s: expired %v, want %v", step.open, got, step.want)
		}
	}
	counts, err := gw.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := counts[store.SessionExpired], 3; got != want {
		t.Errorf("stored expired sessions: got %d, want %d (%v)", got, want, counts)
	}
}
