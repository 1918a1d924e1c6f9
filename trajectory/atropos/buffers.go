package atropos

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

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

// budget bounds the decompressed bytes held by all requests together
// (Config.InflateBudget) and counts them for the metrics.
type budget struct {
	sem  *semaphore.Weighted
	held atomic.Int64
}

func newBudget(n int64) *budget { return &budget{sem: semaphore.NewWeighted(n)} }

// tryAcquire charges n bytes, or reports false when they would pass the
// budget.
func (b *budget) tryAcquire(n int64) bool {
	if !b.sem.TryAcquire(n) {
		return false
	}
	b.held.Add(n)
	return true
}

// release gives n charged bytes back.
func (b *budget) release(n int64) {
	b.held.Add(-n)
	b.sem.Release(n)
}

// body is a request body read by readBody. Once the caller is done with
// data, release gives back its buffers and its inflate budget charge.
type body struct {
	data    []byte
	bufs    [2]*[]byte
	budget  *budget
	charged int64
}

func (b *body) release() {
	for i, p := range b.bufs {
		putBuf(p)
		b.bufs[i] = nil
	}
	b.data = nil
	if b.charged > 0 {
		b.budget.release(b.charged)
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

// chunkSize is the size of the pooled chunks that hold what a gzip body
// inflates to beyond its first buffer.
const chunkSize = 1 << 20

var chunkPool sync.Pool // of *[]byte of length chunkSize

func getChunk() *[]byte {
	if c, ok := chunkPool.Get().(*[]byte); ok {
		return c
	}
	c := make([]byte, chunkSize)
	return &c
}

// inflate replaces b's gzip body (of one or more members) by its
// decompressed bytes. Every byte held is charged to the inflate budget
// first, and a body is refused as soon as it passes
// Config.MaxDecompressed (at once when its last member's trailer
// declares more). It inflates into one reused buffer sized from the
// trailer; what does not fit goes to pooled chunks, joined into one
// buffer of the exact size at the end. So a bomb holds at most the bound,
// in chunks that the next bodies reuse, and a buffer never grows by
// copying.
func (s *Server) inflate(b *body) error {
	gz := b.data
	in := &inflation{s: s, b: b, limit: s.cfg.MaxDecompressed}
	in.over = &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("decompressed request body over %d bytes", in.limit)}
	// The last member's trailer size is the sender's word, but the reader
	// checks it at the member's end. A body whose trailer says more than
	// the bound is either that large or invalid.
	var isize int64
	if len(gz) >= 18 {
		isize = int64(binary.LittleEndian.Uint32(gz[len(gz)-4:]))
		if isize > in.limit {
			return in.over
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
		return errInvalidGzip
	}
	defer gzipPool.Put(zr)
	in.zr = zr
	// The trailer sizes the buffer of a one-member body exactly (with room
	// to read its end); it only counts within 8x the compressed size. One
	// smaller than the body is the last of several members: then 4x the
	// compressed size.
	hint := int64(4 * len(gz))
	if isize >= int64(len(gz)) {
		hint = min(isize, int64(8*len(gz)))
	}
	hint = min(hint+bytes.MinRead, in.limit)
	if !in.charge(hint) {
		return errInflateBudget
	}
	first := getBuf(int(hint))
	b.bufs[1] = first
	n, err := io.ReadFull(zr, (*first)[:hint])
	*first = (*first)[:n]
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		putBuf(b.bufs[0]) // the compressed bytes, read through
		b.bufs[0], b.data = nil, *first
		return nil
	case err != nil:
		return errInvalidGzip
	}
	// More than the first buffer holds: on into chunks.
	defer in.returnChunks()
	total, err := in.readChunks(hint)
	if err != nil {
		return err
	}
	if total == hint { // the first buffer held it all, to the byte
		putBuf(b.bufs[0])
		b.bufs[0], b.data = nil, *first
		return nil
	}
	return in.join(first, hint, total)
}

// errInvalidGzip is the 400 of a body that is not gzip.
var errInvalidGzip = &httpError{http.StatusBadRequest, "Invalid gzip payload"}

// inflation is the state of decompressing one body past its first buffer.
// It holds chunks from a pool, each charged to the server's budget.
type inflation struct {
	s      *Server
	b      *body
	zr     *gzip.Reader
	limit  int64
	over   *httpError
	chunks [][]byte
	sizes  []int64 // charged for each chunk
}

// charge takes n bytes of the server's inflating budget for the body.
func (in *inflation) charge(n int64) bool {
	if !in.s.inflating.tryAcquire(n) {
		return false
	}
	in.b.charged += n
	return true
}

// uncharge gives n bytes back.
func (in *inflation) uncharge(n int64) {
	in.s.inflating.release(n)
	in.b.charged -= n
}

// readChunks reads the rest of the body into chunks, up to the limit. It
// returns the total decompressed size, counting from total.
func (in *inflation) readChunks(total int64) (int64, error) {
	for {
		if total == in.limit {
			// At the bound: one byte more is over it.
			var one [1]byte
			n, err := io.ReadFull(in.zr, one[:])
			if n > 0 {
				return 0, in.over
			}
			if err != io.EOF {
				return 0, errInvalidGzip
			}
			return total, nil
		}
		size := min(chunkSize, in.limit-total)
		if !in.charge(size) {
			return 0, errInflateBudget
		}
		c := (*getChunk())[:size]
		n, err := io.ReadFull(in.zr, c)
		in.chunks, in.sizes = append(in.chunks, c[:n]), append(in.sizes, size)
		total += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, nil
		}
		if err != nil {
			return 0, errInvalidGzip
		}
	}
}

// join copies the first buffer and the chunks into one buffer of exactly
// total bytes, and makes it the body. The first buffer comes with hint
// bytes charged.
func (in *inflation) join(first *[]byte, hint, total int64) error {
	if !in.charge(total) {
		return errInflateBudget
	}
	whole := make([]byte, 0, total)
	whole = append(whole, *first...)
	for i, c := range in.chunks {
		whole = append(whole, c...)
		in.uncharge(in.sizes[i])
	}
	putBuf(first)
	in.uncharge(hint)
	putBuf(in.b.bufs[0])
	in.b.bufs = [2]*[]byte{nil, &whole}
	in.b.data = whole
	return nil
}

// returnChunks gives the chunks back to their pool.
func (in *inflation) returnChunks() {
	for _, c := range in.chunks {
		c = c[:chunkSize]
		chunkPool.Put(&c)
	}
}
