package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/modeltest"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// Config.Ended sees a session rewarded, with its calls and reward, and
// one expired, with its calls and no reward.
func TestEndedSeesEverySession(t *testing.T) {
	model := modeltest.New("m", func(context.Context, *delegate.Request) (*delegate.Response, error) {
		return modeltest.Text("ok"), nil
	})
	type end struct {
		fin     *gateway.Finished
		expired bool
	}
	var mu sync.Mutex
	var ends []end
	c := &clock{}
	cfg := gateway.DefaultConfig()
	cfg.Dir, cfg.TTL, cfg.Now = t.TempDir(), time.Minute, c.now
	cfg.Ended = func(fin *gateway.Finished, expired bool) {
		mu.Lock()
		ends = append(ends, end{fin, expired})
		mu.Unlock()
	}
	gw, err := gateway.Open(context.Background(), cfg, nil, model)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw)
	defer srv.Close()
	post := func(url, key, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", strings.SplitN(url, "sess-", 2)[0], resp.StatusCode, b)
		}
		return b
	}
	open := func() gateway.CreateResponse {
		var cr gateway.CreateResponse
		if err := json.Unmarshal(post(srv.URL+"/sessions", "", `{"group":"g"}`), &cr); err != nil {
			t.Fatal(err)
		}
		post(cr.BaseURL+"/chat/completions", cr.SessionID, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		return cr
	}
	rewarded := open()
	open() // left to expire
	post(srv.URL+"/sessions/"+rewarded.SessionID+"/reward", "", `{"reward":0.5}`)
	c.advance(2 * time.Minute)
	open() // a request to /sessions expires the sessions past their time

	mu.Lock()
	defer mu.Unlock()
	if len(ends) != 2 {
		t.Fatalf("Ended saw %d sessions, want 2", len(ends))
	}
	for i, tt := range []struct {
		expired bool
		reward  float64
	}{{false, 0.5}, {true, 0}} {
		got := ends[i]
		if got.expired != tt.expired || got.fin.Reward != tt.reward || len(got.fin.Calls) != 1 || got.fin.Group != "g" {
			t.Errorf("session %d: expired %v, reward %v, %d calls, group %q; want expired %v, reward %v, 1 call, g",
				i, got.expired, got.fin.Reward, len(got.fin.Calls), got.fin.Group, tt.expired, tt.reward)
		}
		if !got.fin.Finished.After(got.fin.Created) {
			t.Errorf("session %d: finished %v, created %v", i, got.fin.Finished, got.fin.Created)
		}
	}
}
