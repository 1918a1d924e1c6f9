package standin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// completionID matches a completion's id, new on every call.
var completionID = regexp.MustCompile(`"id":"chatcmpl-[0-9a-f]+"`)

// TestForwarder checks that a stand-in behind the forwarder answers as it
// does directly: same status, same content type, same body but for the
// completion's id, new on every call.
func TestForwarder(t *testing.T) {
	s, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewServer(s)
	defer backend.Close()
	fwd := Forwarder(backend.URL+"/v1/chat/completions", 2)
	proxy := httptest.NewServer(fwd)
	defer proxy.Close()
	body := `{"model":"standin","messages":[{"role":"user","content":"What is 2+2?"}],"temperature":0}`
	post := func(url string) (int, string, string) {
		t.Helper()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), completionID.ReplaceAllString(string(b), `"id":""`)
	}
	wantStatus, wantType, wantBody := post(backend.URL + "/v1/chat/completions")
	gotStatus, gotType, gotBody := post(proxy.URL)
	if gotStatus != wantStatus || gotType != wantType || gotBody != wantBody {
		t.Errorf("through the forwarder: %d %q %q; directly: %d %q %q", gotStatus, gotType, gotBody, wantStatus, wantType, wantBody)
	}
	if wantStatus != http.StatusOK {
		t.Errorf("the stand-in answered %d", wantStatus)
	}
	// A backend that is gone is a bad gateway, not a hang.
	backend.Close()
	if status, _, _ := post(proxy.URL); status != http.StatusBadGateway {
		t.Errorf("with the backend gone: status %d, want %d", status, http.StatusBadGateway)
	}
}
