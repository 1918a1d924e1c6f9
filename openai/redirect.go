package openai

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// credentialHeaders are the request headers a redirect to another
// origin must not carry.
var credentialHeaders = []string{"Authorization", "Cookie", "Cookie2"}

// withRedirectPolicy returns a copy of hc whose redirects drop the API key
// when they leave the first request's origin. net/http keeps it on the
// same host at another port or scheme, which would hand the key to
// whatever listens there. hc's own CheckRedirect, if any, runs after.
func withRedirectPolicy(hc *http.Client) *http.Client {
	c := *hc
	next := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		stripCrossOrigin(req, via)
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// stripCrossOrigin removes credentials from req once the chain of
// redirects via has left the origin of its first request, even if it
// comes back.
func stripCrossOrigin(req *http.Request, via []*http.Request) {
	first := origin(via[0].URL)
	left := origin(req.URL) != first
	for _, r := range via[1:] {
		left = left || origin(r.URL) != first
	}
	if left {
		for _, h := range credentialHeaders {
			req.Header.Del(h)
		}
	}
}

// origin is a URL's scheme, host and port, the port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
