package server_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/server"
	"github.com/delegatelab/delegate/tokenizer"
)

// Bounds of TestServerMemoryOfHostileShapes, stated in docs/serve.md.
// A request of any shape, its body at most the 1 MiB limit,
// allocates at most allocPerRequest bytes in the process, server and client together.
// The server holds nothing of it once answered.
const (
	allocPerRequest = 8 << 20
	heldAfterAll    = 8 << 20
)

// hostileShapes are request bodies just under the 1 MiB limit, each
// made of what costs a server most per byte.
func hostileShapes(limit int) map[string]struct {
	body   string
	status int
} {
	// fill repeats item, separated by commas, to about limit bytes.
	fill := func(prefix, item, suffix string) string {
		n := (limit - len(prefix) - len(suffix) - 64) / (len(item) + 1)
		return prefix + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + suffix
	}
	user := `{"role":"user","content":"x"}`
	deep := func(prefix, suffix string) string {
		n := (limit - len(prefix) - len(suffix) - 64) / 2
		return prefix + strings.Repeat("[", n) + strings.Repeat("]", n) + suffix
	}
	parts := `{"role":"user","content":[` + strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"a"},`, server.MaxContentParts), ",") + `]}`
	manyMessages := make([]string, server.MaxMessages)
	for i := range manyMessages {
		manyMessages[i] = `{"role":"user"}`
	}
	return map[string]struct {
		body   string
		status int
	}{
		"many stops":                       {fill(`{"model":"tiny","messages":[`+user+`],"stop":[`, `"a"`, `]}`), 400},
		"many empty messages":              {fill(`{"model":"tiny","messages":[`, `{"role":"user"}`, `]}`), 400},
		"messages at the bound, no text":   {`{"model":"tiny","messages":[` + strings.Join(manyMessages, ",") + `]}`, 400},
		"many tools":                       {fill(`{"model":"tiny","messages":[`+user+`],"tools":[`, `{"type":"function","function":{"name":"f"}}`, `]}`), 400},
		"many tool calls":                  {fill(`{"model":"tiny","messages":[{"role":"assistant","content":null,"tool_calls":[`, `{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}`, `]}]}`), 400},
		"many content parts":               {fill(`{"model":"tiny","messages":[{"role":"user","content":[`, `{"type":"text","text":"a"}`, `]}]}`), 400},
		"many small lists":                 {fill(`{"model":"tiny","messages":[`, parts, `]}`), 400},
		"deep nesting in parameters":       {deep(`{"model":"tiny","messages":[`+user+`],"tools":[{"type":"function","function":{"name":"f","parameters":`, `}}]}`), 400},
		"deep nesting in content":          {deep(`{"model":"tiny","messages":[{"role":"user","content":`, `}]}`), 400},
		"deep nesting in an unknown field": {deep(`{"model":"tiny","messages":[`+user+`],"extra":`, `}`), 400},
		"many metadata keys":               {`{"model":"tiny","messages":[` + user + `],"metadata":{` + strings.TrimSuffix(strings.Repeat(`"k":"v",`, (limit-200)/8), ",") + `}}`, 400},
		"one long text":                    {`{"model":"tiny","messages":[{"role":"user","content":"` + strings.Repeat("a", limit-100) + `"}]}`, 400},
		"many arguments":                   {fill(`{"model":"tiny","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":[`, `1`, `]}}]}]}`), 400},
	}
}

// TestServerMemoryOfHostileShapes sends each shape several times to a server of a small local model.
// It measures the process's allocations around them with runtime.MemStats.
// Each request must stay under allocPerRequest,
// and the heap after them all must hold under heldAfterAll more than before.
func TestServerMemoryOfHostileShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("sends about 70 MiB of requests")
	}
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 1, Heads: 2, KVHeads: 1, Hidden: 32, Context: 256}.WithDefaults()
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(1)
	m, err := local.New(p, local.Config{Name: "tiny", MaxNew: 4, MaxBatch: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := serve(t, m)
	const rounds = 5
	limit := int(server.DefaultConfig().MaxBody)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	held := before.HeapAlloc
	for name, shape := range hostileShapes(limit) {
		if len(shape.body) > limit {
			t.Fatalf("%s: body of %d bytes passes the limit", name, len(shape.body))
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range rounds {
			req, err := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(shape.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			_, _ = fmt.Fprint(&b, resp.Status) // the status is what is checked
			resp.Body.Close()
			if resp.StatusCode != shape.status {
				t.Errorf("%s: status %d, want %d", name, resp.StatusCode, shape.status)
			}
		}
		runtime.ReadMemStats(&after)
		per := (after.TotalAlloc - before.TotalAlloc) / rounds
		t.Logf("%-34s body %7d B, allocated %8d B per request (%.1f× the body)", name, len(shape.body), per, float64(per)/float64(len(shape.body)))
		if per > allocPerRequest {
			t.Errorf("%s: %d bytes allocated per request, want at most %d", name, per, allocPerRequest)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("heap held: %d B before, %d B after", held, after.HeapAlloc)
	if after.HeapAlloc > held+heldAfterAll {
		t.Errorf("heap holds %d bytes after the requests, %d before; want at most %d more", after.HeapAlloc, held, heldAfterAll)
	}
}
