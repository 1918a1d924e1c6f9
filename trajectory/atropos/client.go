package atropos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/internal/edge"
)

// Client is the HTTP plumbing shared by TrainerClient and EnvClient. Its
// methods may run concurrently. Start from DefaultClient: a zero field
// means zero.
type Client struct {
	// URL is the API's base URL, e.g. http://127.0.0.1:8000.
	URL string
	// Token, when set, is sent as a bearer token.
	Token string
	// HTTP is the client to use; nil means one with a 5-minute timeout.
	// Either way redirects follow edge.CheckRedirect: the token does not
	// follow one to another origin.
	HTTP *http.Client
	// Plain sends request bodies uncompressed. By default bodies of 1 KiB
	// or more go gzip-compressed when that makes them smaller, as
	// BaseEnv sends them; on loopback plain JSON costs less CPU.
	Plain bool
	// Retries is how many times a failed call is tried again. A call fails
	// on a connection error or a 5xx. Backoff runs from 100ms to 5s.
	// 0 tries each call once.
	Retries int
}

// DefaultClient returns the defaults: 8 retries. URL is left to set.
func DefaultClient() Client {
	return Client{Retries: 8}
}

// Validate reports the first invalid field, naming it.
func (c *Client) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("atropos client: url is empty")
	case c.Retries < 0:
		return fmt.Errorf("atropos client: retries %d is negative", c.Retries)
	}
	return nil
}

var defaultHTTP = &http.Client{Timeout: 5 * time.Minute, CheckRedirect: edge.CheckRedirect}

// gzipped is a request body already gzip-compressed: do sends it as is.
type gzipped []byte

// rawAnswer receives a 200 answer's bytes undecoded. hint is the size to
// expect when the answer comes without a Content-Length (a streamed
// batch), so that a batch of tens of MB is read into one allocation
// rather than a buffer doubled twenty times.
type rawAnswer struct {
	data *[]byte
	hint int
}

// maxHint bounds the buffer a rawAnswer's hint preallocates.
const maxHint = 256 << 20

// do sends a request and decodes a 200 answer into out (raw bytes when
// out is *rawAnswer). Bodies of 1 KiB or more go gzip-compressed, as
// BaseEnv sends them. Retried calls are safe: pushes are deduplicated,
// batches are re-fetched by step.
func (c *Client) do(ctx context.Context, method, path string, in any, out any) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	payload, gz, err := c.encode(in)
	if err != nil {
		return fmt.Errorf("%s %s: encode: %w", method, path, err)
	}
	hc := defaultHTTP
	if c.HTTP != nil {
		hc = edge.WithRedirectPolicy(c.HTTP)
	}
	wait := 100 * time.Millisecond
	var last error
	for attempt := 0; attempt <= c.Retries; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return fmt.Errorf("%s %s: %w (last error: %v)", method, path, ctx.Err(), last)
			}
			wait = min(2*wait, 5*time.Second)
		}
		req, err := c.request(ctx, method, path, payload, gz)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s %s: %w", method, path, ctx.Err())
			}
			last = &delegate.APIError{Type: delegate.ErrKindConnection, Message: err.Error(), Attempts: attempt + 1}
			continue
		}
		data, err := readAnswer(resp, out)
		if err != nil {
			last = &delegate.APIError{Status: resp.StatusCode, Type: delegate.ErrKindConnection, Message: err.Error(), Attempts: attempt + 1}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			last = &delegate.APIError{Status: resp.StatusCode, Message: string(bytes.TrimSpace(data)), Attempts: attempt + 1}
			if resp.StatusCode >= 500 {
				continue
			}
			return fmt.Errorf("%s %s: %w", method, path, last)
		}
		if raw, ok := out.(*rawAnswer); ok {
			*raw.data = data
			return nil
		}
		if out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("%s %s: %w", method, path, &delegate.APIError{Status: 200, Type: delegate.ErrKindDecode, Message: err.Error()})
			}
		}
		return nil
	}
	return fmt.Errorf("%s %s: %w", method, path, last)
}

// encode makes the body of in: nil for none, bytes as they are, anything
// else as JSON. Unless Plain, a body of 1 KiB or more is gzipped when that
// makes it smaller. gz says the payload is gzipped.
func (c *Client) encode(in any) (payload []byte, gz bool, err error) {
	switch v := in.(type) {
	case nil:
	case gzipped:
		payload, gz = v, true
	case []byte:
		payload = v
	default:
		if payload, err = json.Marshal(v); err != nil {
			return nil, false, err
		}
	}
	if len(payload) >= 1024 && !c.Plain && !gz {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level never fails
		_, _ = zw.Write(payload)                           // writes to a bytes.Buffer do not fail
		_ = zw.Close()
		if buf.Len() < len(payload) {
			payload, gz = buf.Bytes(), true
		}
	}
	return payload, gz, nil
}

// request builds one attempt's request.
func (c *Client) request(ctx context.Context, method, path string, payload []byte, gz bool) (*http.Request, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// readAnswer reads and closes resp's body, sized from its length or, for
// a raw answer, the caller's hint.
func readAnswer(resp *http.Response, out any) ([]byte, error) {
	defer resp.Body.Close()
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= maxHint {
		buf.Grow(int(n) + bytes.MinRead)
	} else if raw, ok := out.(*rawAnswer); ok && n < 0 && raw.hint > 0 {
		buf.Grow(min(raw.hint, maxHint) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(resp.Body)
	return buf.Bytes(), err
}

// TrainerClient is the trainer side, behaving like Atropos's example
// trainer: register once, then poll GET /batch. It is not safe for
// concurrent use, since it tracks the step. Start from
// DefaultTrainerClient: a zero field means zero.
type TrainerClient struct {
	Client
	// Last is the step of the last batch received; Next asks for Last+1.
	// Register sets it to the starting step; a trainer resuming from a
	// checkpoint of step K sets it to K and gets K+1 again if it was
	// already handed out.
	Last int
	// Poll is the wait between polls when no batch is ready. Above 0.
	Poll time.Duration
	// Wait, when positive, asks the server to hold each GET /batch until the
	// batch is ready, for up to Wait. This is delegate's wait=S. The batch
	// comes as soon as it is ready, with no poll interval. A server that
	// answers at once anyway (Atropos's) is polled every Poll as without it.
	Wait time.Duration

	lastSize int // bytes of the last batch answer: the next one's likely size
}

// DefaultTrainerClient returns the defaults: DefaultClient's, and a poll
// every second without a wait. URL is left to set.
func DefaultTrainerClient() TrainerClient {
	return TrainerClient{Client: DefaultClient(), Poll: time.Second}
}

// Validate reports the first invalid field, naming it.
func (c *TrainerClient) Validate() error {
	if err := c.Client.Validate(); err != nil {
		return err
	}
	switch {
	case c.Poll <= 0:
		return fmt.Errorf("atropos trainer client: poll %v: want above 0", c.Poll)
	case c.Wait < 0:
		return fmt.Errorf("atropos trainer client: wait %v is negative", c.Wait)
	}
	return nil
}

// Register sends POST /register.
func (c *TrainerClient) Register(ctx context.Context, reg Registration) error {
	var resp map[string]json.RawMessage
	if err := c.do(ctx, http.MethodPost, "/register", reg, &resp); err != nil {
		return err
	}
	if _, ok := resp["uuid"]; !ok {
		return fmt.Errorf("register: no uuid in the answer")
	}
	c.Last = reg.StartingStep
	return nil
}

// Status sends GET /status.
func (c *TrainerClient) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, "/status", nil, &st)
	return st, err
}

// NextRaw polls until the batch of step Last+1 is ready and returns the
// step and the raw response body ({"batch":[...],"step":N}). It reads
// only the answer's head and tail, not the batch in between: the caller
// decodes it (Next does, once).
func (c *TrainerClient) NextRaw(ctx context.Context) (int, []byte, error) {
	if err := c.Validate(); err != nil {
		return 0, nil, err
	}
	for {
		var raw []byte
		path := "/batch?step=" + strconv.Itoa(c.Last+1)
		if c.Wait > 0 {
			path += "&wait=" + seconds(c.Wait)
		}
		asked := time.Now()
		if err := c.do(ctx, http.MethodGet, path, nil, &rawAnswer{data: &raw, hint: c.lastSize}); err != nil {
			return 0, nil, err
		}
		step, ready, err := batchHead(raw)
		if err != nil {
			return 0, nil, fmt.Errorf("batch: %w", err)
		}
		if ready {
			if step == stepUnknown {
				// Atropos's own server numbers no batch: each one it hands
				// out is the next step.
				step = c.Last + 1
			}
			if step != c.Last+1 {
				return 0, nil, fmt.Errorf("batch: asked for step %d, got %d", c.Last+1, step)
			}
			c.Last, c.lastSize = step, len(raw)
			return step, raw, nil
		}
		if c.Wait > 0 && time.Since(asked) >= c.Wait/2 {
			continue // the server held the request: ask again at once
		}
		select {
		case <-time.After(c.Poll):
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

// stepUnknown is batchHead's step of an answer that names none, as
// Atropos's own server writes {"batch": [...]}.
const stepUnknown = -1

// batchHead reads a GET /batch answer's step and whether it carries a
// batch. The server writes a batch as {"batch":[...],"step":N}, so the
// step is read from the tail without scanning the tens of MB of groups
// between; any other answer (no batch yet, the not-registered error, or
// another server's layout) is small or rare and decoded whole. An answer
// without a step has step stepUnknown.
func batchHead(raw []byte) (step int, ready bool, err error) {
	if body, ok := bytes.CutPrefix(raw, []byte(`{"batch":[`)); ok {
		if i := bytes.LastIndex(body, []byte(`],"step":`)); i >= 0 {
			if n, err := strconv.Atoi(string(bytes.TrimSuffix(body[i+len(`],"step":`):], []byte("}")))); err == nil {
				return n, true, nil
			}
		}
	}
	var head struct {
		Batch   json.RawMessage `json:"batch"`
		Step    *int            `json:"step"`
		Status  string          `json:"status"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return 0, false, err
	}
	if head.Status == "error" {
		return 0, false, errors.New(head.Message)
	}
	step = stepUnknown
	if head.Step != nil {
		step = *head.Step
	}
	return step, !isNull(head.Batch), nil
}

// Next is NextRaw decoded: the batch is parsed once.
func (c *TrainerClient) Next(ctx context.Context) (Batch, error) {
	step, raw, err := c.NextRaw(ctx)
	if err != nil {
		return Batch{}, err
	}
	var b Batch
	if err := json.Unmarshal(raw, &b); err != nil {
		return Batch{}, fmt.Errorf("decode batch of step %d: %w", c.Last, err)
	}
	b.Step = step // the answer's, or the next step when it names none
	return b, nil
}

// EnvClient is the environment side, behaving like Atropos's BaseEnv. It
// registers, waiting for the trainer to start, paces by GET /status-env
// and pushes groups. Methods may run concurrently after Register. Start
// from DefaultEnvClient: a zero field means zero.
type EnvClient struct {
	Client
	// Env is the registration sent by Register.
	Env RegisterEnv
	// MaxBatchesOffpolicy is BaseEnv's max_batches_offpolicy: Wait holds
	// while the queue holds this many batches. At least 1.
	MaxBatchesOffpolicy int
	// Poll is the wait between tries. Above 0.
	Poll time.Duration

	// Set by Register.
	ID        int
	BatchSize int
	// BatchGroups is the trainer's batch_groups: positive when a batch
	// counts groups, and a group may then be empty.
	BatchGroups int
	Start       RegisterEnvResponse
}

// DefaultEnvClient returns BaseEnv's defaults: DefaultClient's, 3 batches
// off-policy and a try every second. URL and Env are left to set.
func DefaultEnvClient() EnvClient {
	return EnvClient{Client: DefaultClient(), MaxBatchesOffpolicy: 3, Poll: time.Second}
}

// Validate reports the first invalid field, naming it.
func (c *EnvClient) Validate() error {
	if err := c.Client.Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxBatchesOffpolicy < 1:
		return fmt.Errorf("atropos env client: max_batches_offpolicy %d: want at least 1", c.MaxBatchesOffpolicy)
	case c.Poll <= 0:
		return fmt.Errorf("atropos env client: poll %v: want above 0", c.Poll)
	}
	return nil
}

// Register sends POST /register-env until the trainer has started, then
// reads the batch size from GET /info.
func (c *EnvClient) Register(ctx context.Context) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("register env %q: %w", c.Env.DesiredName, err)
	}
	for {
		var resp RegisterEnvResponse
		if err := c.do(ctx, http.MethodPost, "/register-env", c.Env, &resp); err != nil {
			return err
		}
		if resp.Status == "success" {
			c.ID, c.Start = resp.EnvID, resp
			break
		}
		select {
		case <-time.After(c.Poll):
		case <-ctx.Done():
			return fmt.Errorf("register env %q: %w (last status %q)", c.Env.DesiredName, ctx.Err(), resp.Status)
		}
	}
	var info struct {
		BatchSize   int `json:"batch_size"`
		BatchGroups int `json:"batch_groups"`
	}
	if err := c.do(ctx, http.MethodGet, "/info", nil, &info); err != nil {
		return err
	}
	c.BatchSize, c.BatchGroups = info.BatchSize, info.BatchGroups
	return nil
}

// Status sends GET /status-env with the env id as a JSON body.
func (c *EnvClient) Status(ctx context.Context) (StatusEnv, error) {
	var st StatusEnv
	err := c.do(ctx, http.MethodGet, "/status-env", EnvIdentifier{EnvID: c.ID}, &st)
	return st, err
}

// StatusAfter is Status, held by delegate's server for a newer step. The
// server holds it until the trainer finishes a step after step
// (trainer_step > step), or until wait passes. Either way it returns the
// status then. A server that answers at once (Atropos's) answers as Status.
func (c *EnvClient) StatusAfter(ctx context.Context, step int, wait time.Duration) (StatusEnv, error) {
	var st StatusEnv
	path := "/status-env?after_step=" + strconv.Itoa(step) + "&wait=" + seconds(wait)
	err := c.do(ctx, http.MethodGet, path, EnvIdentifier{EnvID: c.ID}, &st)
	return st, err
}

// seconds is d as the wait query parameter: seconds, to the millisecond.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64)
}

// Wait returns once the queue has room by BaseEnv's rule: it pauses while
// queue_size * group_size >= max_batches_offpolicy * batch_size. It
// returns the status that let it go (its current_step is the trainer's).
func (c *EnvClient) Wait(ctx context.Context) (StatusEnv, error) {
	if err := c.Validate(); err != nil {
		return StatusEnv{}, err
	}
	for {
		st, err := c.Status(ctx)
		if err != nil {
			return StatusEnv{}, err
		}
		if st.QueueSize*c.Env.GroupSize < c.MaxBatchesOffpolicy*c.BatchSize {
			return st, nil
		}
		select {
		case <-time.After(c.Poll):
		case <-ctx.Done():
			return StatusEnv{}, ctx.Err()
		}
	}
}

// Push sends one group (env_id set to this environment's) to POST
// /scored_data; it returns once the server has stored it.
func (c *EnvClient) Push(ctx context.Context, g ScoredData) (ScoredResponse, error) {
	id := c.ID
	g.EnvID = &id
	var resp ScoredResponse
	err := c.do(ctx, http.MethodPost, "/scored_data", g, &resp)
	return resp, err
}

// PushRaw sends a group already encoded as JSON (its env_id as the
// caller set it).
func (c *EnvClient) PushRaw(ctx context.Context, body []byte) (ScoredResponse, error) {
	var resp ScoredResponse
	err := c.do(ctx, http.MethodPost, "/scored_data", body, &resp)
	return resp, err
}

// PushGzip sends a group already encoded as JSON and gzip-compressed. Its
// env_id is as the caller set it. It goes as is, with Content-Encoding:
// gzip, whatever Plain says.
func (c *EnvClient) PushGzip(ctx context.Context, gz []byte) (ScoredResponse, error) {
	var resp ScoredResponse
	err := c.do(ctx, http.MethodPost, "/scored_data", gzipped(gz), &resp)
	return resp, err
}

// Disconnect sends POST /disconnect-env.
func (c *EnvClient) Disconnect(ctx context.Context) error {
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := c.do(ctx, http.MethodPost, "/disconnect-env", EnvIdentifier{EnvID: c.ID}, &resp); err != nil {
		return err
	}
	if resp.Status != "success" {
		return errors.New("disconnect env: " + resp.Error)
	}
	return nil
}
