package edge

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// credentialHeaders are the request headers a redirect to another
// origin must not carry.
var credentialHeaders = []string{"Authorization", "Cookie", "Cookie2"}

// CheckRedirect is the redirect policy of every HTTP client of the
// project, for an http.Client's CheckRedirect. It drops credentials once
// a chain of redirects leaves the first request's origin (scheme, host
// and port), even if it comes back. net/http keeps them on the same host
// at another port or scheme, which would hand a key to whatever listens
// there. It stops after 10 redirects.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	stripCrossOrigin(req, via)
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// WithRedirectPolicy returns a copy of hc whose redirects drop
// credentials as CheckRedirect does. hc's own CheckRedirect, if any,
// then decides whether to follow.
func WithRedirectPolicy(hc *http.Client) *http.Client {
	c := *hc
	next := hc.CheckRedirect
	if next == nil {
		c.CheckRedirect = CheckRedirect
		return &c
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		stripCrossOrigin(req, via)
		return next(req, via)
	}
	return &c
}

// stripCrossOrigin removes credentials from req once the chain of
// redirects via has left the origin of its first request.
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
