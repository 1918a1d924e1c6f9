package api

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// credentialHeaders are the request headers a redirect to another
// origin must not carry.
var credentialHeaders = []string{"Authorization", "Cookie", "Cookie2"}

// CheckRedirect is the redirect policy of the API's clients, for an
// http.Client's CheckRedirect. It drops credentials once a redirect
// leaves the first request's origin (scheme, host and port): net/http
// keeps them on the same host at another port or scheme, which would hand
// the token to whatever listens there. It stops after 10 redirects.
func CheckRedirect(req *http.Request, via []*http.Request) error {
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
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// withRedirectPolicy returns a copy of hc that follows CheckRedirect and
// then hc's own CheckRedirect, if any.
func withRedirectPolicy(hc *http.Client) *http.Client {
	c := *hc
	next := hc.CheckRedirect
	if next == nil {
		c.CheckRedirect = CheckRedirect
		return &c
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		_ = CheckRedirect(req, via) // only its stripping: next decides when to stop
		return next(req, via)
	}
	return &c
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
