package atropos

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// gzipMember compresses b as one gzip member.
func gzipMember(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bomb is a gzip body of members members, each inflating to 1 MiB of
// zeros: about 1 KiB per MiB. Its trailer declares only the last
// member's 1 MiB.
func bomb(t *testing.T, members int) []byte {
	t.Helper()
	one := gzipMember(t, make([]byte, 1<<20))
	return bytes.Repeat(one, members)
}

// digitsText is n bytes of random digits and commas, which compress
// about as much as a group's token ids.
func digitsText(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = "0123456789,"[rng.IntN(11)]
	}
	return b
}

// postGzip sends body as a gzip /scored_data and returns the status and
// the bytes allocated meanwhile (by the whole process).
func postGzip(t *testing.T, url string, body []byte) (int, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	status := postGzipStatus(t, url, body)
	runtime.ReadMemStats(&after)
	return status, after.TotalAlloc - before.TotalAlloc
}

func postGzipStatus(t *testing.T, url string, body []byte) int {
	req, err := http.NewRequest("POST", url+"/scored_data", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// A gzip bomb is refused once it passes the decompressed bound. It has
// allocated at most the bound, never what the bomb inflates to. Bodies
// inflated at once share one budget.
func TestGzipBombBounded(t *testing.T) {
	const mib = 1 << 20
	cfg := DefaultConfig()
	cfg.MaxBody, cfg.MaxDecompressed, cfg.InflateBudget = 8*mib, 32*mib, 64*mib
	srv, err := NewInMemory(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	limit := srv.cfg.MaxDecompressed
	budgetFree := func(t *testing.T) {
		t.Helper()
		if got := srv.Stats().Inflating; got != 0 {
			t.Errorf("Stats().Inflating = %d after the request, want 0", got)
		}
		if !srv.inflating.tryAcquire(srv.cfg.InflateBudget) {
			t.Fatal("the inflate budget was not given back")
		}
		if got := srv.Stats().Inflating; got != srv.cfg.InflateBudget {
			t.Errorf("Stats().Inflating = %d with the whole budget held, want %d", got, srv.cfg.InflateBudget)
		}
		srv.inflating.release(srv.cfg.InflateBudget)
	}

	gib := bomb(t, 1024) // 1 MiB of gzip, 1 GiB inflated
	if len(gib) > 2*mib {
		t.Fatalf("the bomb is %d bytes, want about 1 MiB", len(gib))
	}
	for _, tc := range []struct {
		name     string
		body     []byte
		want     int
		maxAlloc uint64
	}{
		// Inflated up to the bound, then refused: the bound's worth of
		// chunks at most (fewer when the pool has some).
		{"1 GiB in 1024 members", gib, http.StatusRequestEntityTooLarge, uint64(limit) + 8*mib},
		// The trailer declares more than the bound: nothing inflated.
		{"64 MiB in one member", gzipMember(t, make([]byte, 2*limit)), http.StatusRequestEntityTooLarge, 4 * mib},
		// A body within the bound whose trailer says its size is inflated
		// into one buffer of that size, never grown: 4 MiB besides the
		// 3 MiB body as sent.
		{"4 MiB in one member", gzipMember(t, digitsText(4*mib)), http.StatusUnprocessableEntity, 8 * mib},
		// Exactly at the bound is inflated (and is no group: 422), into
		// chunks and then one buffer of its size; one byte more is not.
		{"at the bound", bytes.Repeat(gzipMember(t, make([]byte, limit/4)), 4), http.StatusUnprocessableEntity, uint64(2*limit) + 8*mib},
		{"one byte past the bound", append(bytes.Repeat(gzipMember(t, make([]byte, limit/4)), 4), gzipMember(t, []byte{0})...), http.StatusRequestEntityTooLarge, uint64(limit) + 8*mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, alloc := postGzip(t, hs.URL, tc.body)
			t.Logf("%d MiB allocated", alloc/mib)
			if status != tc.want {
				t.Errorf("status %d, want %d", status, tc.want)
			}
			if alloc > tc.maxAlloc {
				t.Errorf("allocated %d MiB, want at most %d MiB", alloc/mib, tc.maxAlloc/mib)
			}
			budgetFree(t)
		})
	}

	t.Run("budget held by other bodies", func(t *testing.T) {
		// Other requests hold all but 8 MiB of the budget: the bomb is
		// refused with 503 once it would pass it, having allocated no more.
		held := srv.cfg.InflateBudget - 8*mib
		if !srv.inflating.tryAcquire(held) {
			t.Fatal("budget busy")
		}
		status, alloc := postGzip(t, hs.URL, gib)
		srv.inflating.release(held)
		if status != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", status)
		}
		if alloc > 16*mib {
			t.Errorf("allocated %d MiB, want at most 16 MiB", alloc/mib)
		}
		budgetFree(t)
	})

	t.Run("four at once", func(t *testing.T) {
		var wg sync.WaitGroup
		statuses := make([]int, 4)
		for i := range statuses {
			wg.Go(func() { statuses[i] = postGzipStatus(t, hs.URL, gib) })
		}
		wg.Wait()
		for i, s := range statuses {
			if s != http.StatusRequestEntityTooLarge && s != http.StatusServiceUnavailable {
				t.Errorf("bomb %d: status %d, want 413 or 503", i, s)
			}
		}
		budgetFree(t)
	})
}
