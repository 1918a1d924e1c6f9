package edge

import (
	"net/url"
	"testing"
)

func TestOrigin(t *testing.T) {
	tests := []struct{ a, b string }{
		{"http://h/x", "http://H:80/y"},
		{"https://h/x", "https://h:443/"},
	}
	for _, tt := range tests {
		if origin(mustURL(t, tt.a)) != origin(mustURL(t, tt.b)) {
			t.Errorf("origin(%s) != origin(%s); want equal", tt.a, tt.b)
		}
	}
	for _, tt := range []struct{ a, b string }{
		{"http://h/x", "https://h/x"},
		{"http://h:8000/", "http://h:8001/"},
		{"http://h/", "http://sub.h/"},
	} {
		if origin(mustURL(t, tt.a)) == origin(mustURL(t, tt.b)) {
			t.Errorf("origin(%s) == origin(%s); want different", tt.a, tt.b)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
