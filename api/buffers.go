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
// once the caller is done with data.
type body struct {
	data []byte
	bufs [2]*[]byte
}

func (b *body) release() {
	for i, p := range b.bufs {
		putBuf(p)
		b.bufs[i] = nil
	}
	b.data = nil
}

// readBody reads a bounded, possibly gzip-compressed body into reused
// buffers.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (*body, error) {
	n := bytes.MinRead
	if r.ContentLength > 0 && r.ContentLength <= s.cfg.MaxBody {
		n += int(r.ContentLength) // one read for a 2 MB group
	}
	out := &body{bufs: [2]*[]byte{getBuf(n)}}
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
	plain, err := s.inflate(out.data)
	putBuf(out.bufs[0])
	out.bufs[0], out.data = plain, nil
	if err != nil {
		out.release()
		return nil, err
	}
	out.data = *plain
	return out, nil
}

// inflate decompresses a gzip body (of one or more members) into a
// reused buffer, up to Config.MaxDecompressed.
func (s *Server) inflate(gz []byte) (*[]byte, error) {
	zr, _ := gzipPool.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(gz))
	} else {
		err = zr.Reset(bytes.NewReader(gz))
	}
	if err != nil {
		return nil, &httpError{http.StatusBadRequest, "Invalid gzip payload"}
	}
	defer gzipPool.Put(zr)
	// The trailer's size of the (last) member sizes the buffer; it is the
	// sender's word, so it only counts within 8x the compressed size.
	hint := 4 * len(gz)
	if len(gz) >= 18 {
		hint = max(hint, int(binary.LittleEndian.Uint32(gz[len(gz)-4:])))
	}
	hint = int(min(int64(min(hint, 8*len(gz))), s.cfg.MaxDecompressed) + bytes.MinRead)
	buf := getBuf(hint)
	plain := bytes.NewBuffer(*buf)
	_, err = plain.ReadFrom(io.LimitReader(zr, s.cfg.MaxDecompressed+1))
	*buf = plain.Bytes()
	if err != nil {
		putBuf(buf)
		return nil, &httpError{http.StatusBadRequest, "Invalid gzip payload"}
	}
	if int64(plain.Len()) > s.cfg.MaxDecompressed {
		putBuf(buf)
		return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("decompressed request body over %d bytes", s.cfg.MaxDecompressed)}
	}
	return buf, nil
}
