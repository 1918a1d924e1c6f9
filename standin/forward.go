package standin

import (
	"bytes"
	"io"
	"net/http"
)

// Forwarder is the least any gateway does: it reads a request's body,
// posts it to url over kept connections and copies the answer back.
// Benchmarks put it between a client and a backend to measure one HTTP
// hop alone. conns is the number of idle connections kept to url.
func Forwarder(url string, conns int) http.Handler {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body) // the client gone: nothing to do
	})
}
