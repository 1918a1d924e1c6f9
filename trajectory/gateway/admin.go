package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Admin is a client of the gateway's session API.
// It opens sessions and posts their rewards with the admin token.
type Admin struct {
	Base  string       // the gateway's base URL, without a trailing slash
	Token string       // the admin token
	HTTP  *http.Client // nil: http.DefaultClient
}

// adminMaxAnswer bounds the answer Post reads.
const adminMaxAnswer = 1 << 20

// adminRetry is how long Post waits before it tries a busy gateway again.
const adminRetry = time.Second

// Post sends body to path and decodes the answer into v.
// While the gateway is busy (503) it tries again until ctx ends.
// An error names the path up to a session id, never the id.
func (a Admin) Post(ctx context.Context, path, body string, v any) error {
	hc := a.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	for {
		code, b, err := a.post(ctx, hc, path, body)
		if err != nil {
			return err
		}
		switch code {
		case http.StatusOK:
			return json.Unmarshal(b, v)
		case http.StatusServiceUnavailable:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(adminRetry):
			}
		default:
			return fmt.Errorf("POST %s: %d %s", strings.SplitN(path, "sess-", 2)[0], code, b)
		}
	}
}

// post makes one request and reads its whole answer.
func (a Admin) post(ctx context.Context, hc *http.Client, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, adminMaxAnswer))
	return resp.StatusCode, b, err
}
