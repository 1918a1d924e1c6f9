// Package edge is the one HTTP edge that every server of delegate stands
// behind. It checks what a request must pass before a handler sees it:
// the Host header, browser origins, the body's media type and the bearer
// token. It also builds the http.Server with bounded timeouts and decides
// whether a listen address may go without a token. It holds each server's
// Prometheus registry for GET /metrics.
//
// Why each check: a server on loopback is still reachable from a web page
// in a browser on the same machine. A cross-site page can send simple
// requests: a GET, or a POST of text/plain. DNS rebinding lets a page of
// another name reach loopback as its own origin. The Host check stops
// the second, the origin and media-type checks the first, and a token
// stops both.
package edge

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Refusal is an answer the edge gives instead of the handler.
type Refusal struct {
	Status  int
	Code    string // a short machine-readable word, such as "invalid_api_key"
	Message string
}

// Config says what the edge lets through. The zero Config checks Host,
// origin and media type, and asks for no token.
type Config struct {
	// Token, when set, must come with every request outside Open as
	// "Authorization: Bearer TOKEN". It is compared in constant time and
	// never logged.
	Token string
	// Basic also takes the token as the password of HTTP Basic auth,
	// with any user name. Clients that take credentials from a URL, such
	// as Python's websockets and httpx, send them so.
	Basic bool
	// Open lists the paths served without the token, such as /health.
	Open []string
	// Hosts lists the names a Host header may carry besides IP literals
	// and localhost. With a Token set, any name passes: the token is the
	// defence then.
	Hosts []string
	// Realm names the server in WWW-Authenticate.
	Realm string
	// Refuse writes a refusal in the server's own error shape. Nil
	// writes {"error":{"message":...,"code":...}}.
	Refuse func(http.ResponseWriter, Refusal)
}

// Handler returns h behind the checks of c. The checks run in this order:
// Host, origin, media type, token.
func (c Config) Handler(h http.Handler) http.Handler {
	hash := sha256.Sum256([]byte(c.Token))
	refuse := c.Refuse
	if refuse == nil {
		refuse = writeRefusal
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rf, ok := c.check(r, hash); !ok {
			if rf.Status == http.StatusUnauthorized {
				realm := c.Realm
				if realm == "" {
					realm = "delegate"
				}
				w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", realm))
			}
			refuse(w, rf)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Check runs the edge's checks on r alone. A server that routes before it
// authenticates uses it; most use Handler.
func (c Config) Check(r *http.Request) (Refusal, bool) {
	return c.check(r, sha256.Sum256([]byte(c.Token)))
}

func (c Config) check(r *http.Request, hash [sha256.Size]byte) (Refusal, bool) {
	if !c.hostAllowed(r.Host) {
		return Refusal{http.StatusForbidden, "host_not_allowed", fmt.Sprintf(
			"Host %q is not a name of this server: use an IP address or localhost, or start the server with a token", r.Host)}, false
	}
	if why := crossOrigin(r); why != "" {
		return Refusal{http.StatusForbidden, "cross_origin", "requests from a web page of another origin are refused (" + why + ")"}, false
	}
	if why := notJSON(r); why != "" {
		return Refusal{http.StatusUnsupportedMediaType, "unsupported_media_type", why}, false
	}
	if c.Token != "" && !slices.Contains(c.Open, r.URL.Path) && !Authorized(r, hash) && !(c.Basic && AuthorizedBasic(r, hash)) {
		msg := "missing or wrong bearer token: send it as \"Authorization: Bearer TOKEN\""
		if c.Basic {
			msg += ", or as the password of Basic auth (a URL such as http://user:TOKEN@host)"
		}
		return Refusal{http.StatusUnauthorized, "invalid_api_key", msg}, false
	}
	return Refusal{}, true
}

// Authorized reports whether r carries the bearer token whose SHA-256 is
// hash. The scheme's case does not matter (RFC 6750); the token must match
// exactly. Both sides are compared as digests in constant time, so
// neither the token's bytes nor its length show in the timing.
func Authorized(r *http.Request, hash [sha256.Size]byte) bool {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], hash[:]) == 1
}

// AuthorizedBasic reports whether r carries HTTP Basic credentials whose
// password is the token whose SHA-256 is hash. The user name is not
// checked. The password is compared as Authorized compares a token.
func AuthorizedBasic(r *http.Request, hash [sha256.Size]byte) bool {
	_, password, ok := r.BasicAuth()
	if !ok {
		return false
	}
	got := sha256.Sum256([]byte(password))
	return subtle.ConstantTimeCompare(got[:], hash[:]) == 1
}

// hostAllowed reports whether a Host header names this server. An IP
// literal cannot be rebound by DNS, and localhost names resolve to
// loopback alone; any other name must be listed, unless a token is set.
func (c Config) hostAllowed(host string) bool {
	if c.Token != "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	switch {
	case name == "":
		return false // HTTP/1.1 requires a Host; only a bare HTTP/1.0 client omits it
	case isIP(name), name == "localhost", strings.HasSuffix(name, ".localhost"):
		return true
	}
	return slices.ContainsFunc(c.Hosts, func(h string) bool { return strings.EqualFold(h, name) })
}

// isIP reports whether name is an IP literal without a zone, as
// net.ParseIP reads one, without its allocation: every request asks.
func isIP(name string) bool {
	a, err := netip.ParseAddr(name)
	return err == nil && a.Zone() == ""
}

// crossOrigin says why r came from a web page of another origin, or ""
// when it did not. Browsers send Sec-Fetch-Site with every request, GET
// included, and Origin with every cross-origin one but simple GETs.
// Clients that are not browsers send neither.
func crossOrigin(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return "Sec-Fetch-Site: " + site
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return ""
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return "Origin: " + o
	}
	return ""
}

// notJSON says why a request's body is refused for its media type, or ""
// when it may pass. A body must be JSON, or come with no media type at
// all. A browser page can send text/plain or a form across origins
// without asking first; it cannot send application/json so.
func notJSON(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" || r.ContentLength == 0 || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return ""
	}
	if strings.EqualFold(ct, "application/json") {
		return "" // nearly every JSON body's, without ParseMediaType's map
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return ""
	}
	return fmt.Sprintf("Content-Type %q: the body must be application/json", ct)
}

// writeRefusal is the default shape of a refusal.
func writeRefusal(w http.ResponseWriter, rf Refusal) {
	WriteJSON(w, rf.Status, map[string]any{"error": map[string]string{"message": rf.Message, "code": rf.Code}})
}

// WriteJSON answers v as JSON with status. A value that cannot be encoded
// is a bug of the caller: it is answered 500 with the reason.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]any{"error": map[string]string{"message": "encode response: " + err.Error()}}) // a map of strings always encodes
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status line is out; a failed write means the client went away.
	_, _ = w.Write(append(b, '\n'))
}

// Timeouts bound a connection. WriteTimeout bounds a whole response. A
// server that streams pushes the write deadline forward before each event,
// so that a long stream is not cut while a stalled reader is.
type Timeouts struct {
	ReadHeader time.Duration // request line and headers
	Read       time.Duration // headers and body; a handler may clear it once the body is read
	Write      time.Duration // see above
	Idle       time.Duration // a keep-alive connection between requests
}

// DefaultTimeouts are the timeouts of a server that answers within
// seconds. Servers that generate for minutes give Write more.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second, Idle: 60 * time.Second}
}

// Validate reports a timeout that is not positive.
func (t Timeouts) Validate() error {
	if t.ReadHeader <= 0 || t.Read <= 0 || t.Write <= 0 || t.Idle <= 0 {
		return fmt.Errorf("timeouts %+v: each must be positive", t)
	}
	return nil
}

// MaxHeaderBytes bounds a request's headers on every server.
const MaxHeaderBytes = 64 << 10

// Server returns an http.Server for h with timeouts t. Its own errors
// (a failed accept, a malformed request) go to log at level.
func Server(h http.Handler, t Timeouts, log *slog.Logger, level slog.Level) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), level),
	}
}

// IsLoopback reports whether addr (host:port) binds only loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckExposure refuses to listen off loopback without a token, unless
// insecure says the operator means it. what tells, for the error, what is
// missing and how to set it.
func CheckExposure(addr string, hasToken, insecure bool, what string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if IsLoopback(addr) || hasToken || insecure {
		return nil
	}
	return fmt.Errorf("--addr %s listens beyond loopback without %s, or pass --insecure to serve anyone who can reach it", addr, what)
}
