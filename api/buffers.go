package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/sync/semaphore"
)

// A group is megabytes of JSON that passes through up to three buffers
// (the body as sent, inflated, compacted) before its stored form is
// built. Those buffers are reused across requests rather than allocated
// (and zeroed, and collected) for every push. The pools stay bounded:
// at most one buffer of each kind per request served at once
// (Config.MaxConcurrent), none kept over maxPooled, and sync.Pool drops
// idle ones at the next garbage collections.

// maxPooled is the largest buffer kept for reuse.
const maxPooled = 16 << 20

var bufPool sync.Pool // of *[]byte

// getBuf returns an empty buffer with room for n bytes.
func getBuf(n int) *[]byte {
	if b, ok := bufPool.Get().(*[]byte); ok {
		if cap(*b) < n {
			*b = make([]byte, 0, n)
		}
		*b = (*b)[:0]
		return b
	}
	b := make([]byte, 0, n)
	return &b
}

// putBuf gives b back for reuse; the caller no longer uses its bytes.
func putBuf(b *[]byte) {
	if b != nil && cap(*b) <= maxPooled {
		bufPool.Put(b)
	}
}

var gzipPool sync.Pool // of *gzip.Reader

// body is a request body read by readBody; release gives its buffers back
// once the caller is done with data, and its charge to the inflate budget.
type body struct {
	data    []byte
	bufs    [2]*[]byte
	budget  *semaphore.Weighted
	charged int64
}

func (b *body) release() {
	for i, p := range b.bufs {
		putBuf(p)
		b.bufs[i] = nil
	}
	b.data = nil
	if b.charged > 0 {
		b.budget.Release(b.charged)
		b.charged = 0
	}
}

// readBody reads a bounded, possibly gzip-compressed body into reused
// buffers.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (*body, error) {
	n := bytes.MinRead
	if r.ContentLength > 0 && r.ContentLength <= s.cfg.MaxBody {
		n += int(r.ContentLength) // one read for a 2 MB group
	}
	out := &body{bufs: [2]*[]byte{getBuf(n)}, budget: s.inflating}
	raw := bytes.NewBuffer(*out.bufs[0])
	_, err := raw.ReadFrom(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	*out.bufs[0] = raw.Bytes()
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		out.release()
		return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody)}
	case err != nil:
		out.release()
		return nil, &httpError{http.StatusBadRequest, "read body: " + err.Error()}
	}
	out.data = raw.Bytes()
	if !strings.Contains(strings.ToLower(r.Header.Get("Content-Encoding")), "gzip") || len(out.data) == 0 {
		return out, nil
	}
	err = s.inflate(out)
	if err != nil {
		out.release()
		return nil, err
	}
	return out, nil
}

// errInflateBudget answers a body whose inflating would pass the budget.
var errInflateBudget = &httpError{http.StatusServiceUnavailable, "the server holds as many decompressed request bodies as it may; retry later"}

// inflate replaces b's gzip body (of one or more members) by its
// decompressed bytes, in a reused buffer charged to the inflate budget.
// A body is refused as soon as it passes Config.MaxDecompressed: no
// buffer is ever sized beyond that bound, and one whose last member's
// trailer already declares more is refused before inflating anything.
func (s *Server) inflate(b *body) error {
	gz := b.data
	limit := s.cfg.MaxDecompressed
	over := &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("decompressed request body over %d bytes", limit)}
	// The trailer's size of the (last) member is the sender's word, but
	// the reader checks it at the member's end: a body whose trailer says
	// more than the bound is either that large or invalid.
	var isize int64
	if len(gz) >= 18 {
		isize = int64(binary.LittleEndian.Uint32(gz[len(gz)-4:]))
		if isize > limit {
			return over
		}
	}
	zr, _ := gzipPool.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(gz))
	} else {
		err = zr.Reset(bytes.NewReader(gz))
	}
	if err != nil {
		return &httpError{http.StatusBadRequest, "Invalid gzip payload"}
	}
	defer gzipPool.Put(zr)
	// The trailer sizes the buffer of a one-member body exactly (with room
	// to read its end without growing); it only counts within 8x the
	// compressed size. One smaller than the body is the last of several
	// members: then 4x the compressed size.
	hint := int64(4 * len(gz))
	if isize >= int64(len(gz)) {
		hint = min(isize, int64(8*len(gz)))
	}
	hint = min(hint+bytes.MinRead, limit)
	// grow gives b a buffer of capacity n holding what it inflated so
	// far, charging n before allocating it; the old buffer is given back
	// once copied.
	grow := func(n int64) error {
		if !s.inflating.TryAcquire(n) {
			return errInflateBudget
		}
		nb := getBuf(int(n))
		// A pooled buffer may be larger than asked: charge what it holds,
		// or take a new one of the size asked.
		if extra := int64(cap(*nb)) - n; extra > 0 {
			if s.inflating.TryAcquire(extra) {
				n += extra
			} else {
				putBuf(nb)
				fresh := make([]byte, 0, n)
				nb = &fresh
			}
		}
		if old := b.bufs[1]; old != nil {
			*nb = append(*nb, *old...)
			putBuf(old)
			s.inflating.Release(b.charged)
		}
		b.bufs[1], b.charged = nb, n
		return nil
	}
	if err := grow(hint); err != nil {
		return err
	}
	for {
		buf := *b.bufs[1]
		// A pooled buffer may hold more than the bound: read up to it.
		end := int(min(int64(cap(buf)), limit))
		if len(buf) == end {
			if int64(len(buf)) == limit {
				// At the bound: one byte more is over it.
				var one [1]byte
				n, err := io.ReadFull(zr, one[:])
				if n > 0 {
					return over
				}
				if err == io.EOF {
					break
				}
				return &httpError{http.StatusBadRequest, "Invalid gzip payload"}
			}
			if err := grow(min(2*int64(cap(buf)), limit)); err != nil {
				return err
			}
			continue
		}
		n, err := zr.Read(buf[len(buf):end])
		*b.bufs[1] = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return &httpError{http.StatusBadRequest, "Invalid gzip payload"}
		}
	}
	putBuf(b.bufs[0]) // the compressed bytes, read through
	b.bufs[0], b.data = nil, *b.bufs[1]
	return nil
}
