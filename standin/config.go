package standin

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Jitter kinds: how each answer's latency is drawn around Config.Latency.
const (
	JitterFixed     = "fixed"     // exactly Latency
	JitterUniform   = "uniform"   // uniform on Latency × [1−Spread, 1+Spread]
	JitterExp       = "exp"       // Latency × (1−Spread) plus an exponential draw of mean Latency × Spread
	JitterLognormal = "lognormal" // Latency × exp(Spread·Z − Spread²/2), Z standard normal
)

// Every jitter kind keeps the mean latency at Latency.

// Limits checked by Validate.
const (
	maxSpreadLognormal = 3.0
	maxCalls           = 64
	maxReplyBytes      = 1 << 20
)

// FaultRates are the probabilities that a chat completion gets each kind of fault instead of an answer.
// Each is in [0, 1], and they add up to at most 1.
// One draw per request picks at most one fault.
type FaultRates struct {
	RateLimit   float64 // 429 with Retry-After, at once
	ServerError float64 // 500 with an error body, after the latency
	Reset       float64 // the connection is closed (RST) halfway through the body, after the latency
	Truncated   float64 // a 200 whose body, correctly framed, stops mid-JSON, after the latency
	Slow        float64 // the proper answer, after SlowDelay instead of the latency
	Garbage     float64 // a 200 whose body is an HTML error page, not JSON, after the latency
}

func (f FaultRates) sum() float64 {
	return f.RateLimit + f.ServerError + f.Reset + f.Truncated + f.Slow + f.Garbage
}

// Uniform returns rates of p for every kind of fault.
func Uniform(p float64) FaultRates {
	return FaultRates{RateLimit: p, ServerError: p, Reset: p, Truncated: p, Slow: p, Garbage: p}
}

// Config configures a stand-in server. DefaultConfig holds the defaults;
// a zero field means zero.
type Config struct {
	// Latency is the mean time from a request's arrival to its answer.
	Latency time.Duration
	// Jitter is how each latency is drawn: JitterFixed, JitterUniform,
	// JitterExp, JitterLognormal. Spread parameterises it: a fraction in
	// [0, 1] for uniform and exp, the log-space sigma in [0, 3] for
	// lognormal; it must be 0 for fixed.
	Jitter string
	Spread float64
	// Seed feeds the answers and the draws of latency and faults.
	// Answers are a function of the messages and Seed.
	// Draws are a function of Seed and the request's arrival number.
	Seed uint64
	// Faults are the per-kind fault rates; the zero value injects none.
	Faults FaultRates
	// SlowDelay is how long a Slow fault waits before answering. It should
	// exceed the client's timeout.
	SlowDelay time.Duration
	// RetryAfter is what a RateLimit fault asks the client to wait, sent as
	// Retry-After (whole seconds, rounded up) and retry-after-ms.
	RetryAfter time.Duration
	// Model is the model name served and reported, not empty. Requests may
	// name any model; answers report this one.
	Model string
	// ToolCalls is how many parallel delegate calls route's strong model
	// makes in its first turn, at least 1.
	ToolCalls int
	// Subtasks is how many subtasks decompose's planner writes, clamped to
	// the bounds its prompt states; at least 1.
	Subtasks int
	// ReplyBytes is the approximate length of the reasoning text of a full
	// answer (brief answers get a quarter of it).
	ReplyBytes int
}

// DefaultConfig returns the defaults: answers at once, without faults, as model "standin".
// It makes 4 delegate calls, 4 subtasks and 400-byte replies.
func DefaultConfig() Config {
	return Config{
		Jitter: JitterFixed, SlowDelay: 60 * time.Second, RetryAfter: time.Second,
		Model: "standin", ToolCalls: 4, Subtasks: 4, ReplyBytes: 400,
	}
}

// Validate reports every field out of range, each by name.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Latency < 0 {
		bad("latency", "%v is negative", c.Latency)
	}
	switch c.Jitter {
	case JitterFixed:
		if c.Spread != 0 {
			bad("spread", "%v given for fixed latency, want 0", c.Spread)
		}
	case JitterUniform, JitterExp:
		if !(c.Spread >= 0 && c.Spread <= 1) {
			bad("spread", "%v is outside [0, 1] for %s jitter", c.Spread, c.Jitter)
		}
	case JitterLognormal:
		if !(c.Spread >= 0 && c.Spread <= maxSpreadLognormal) {
			bad("spread", "%v is outside [0, %v] for lognormal jitter", c.Spread, maxSpreadLognormal)
		}
	default:
		bad("jitter", "unknown kind %q (known: fixed, uniform, exp, lognormal)", c.Jitter)
	}
	rates := []struct {
		key string
		p   float64
	}{
		{"faults.rate_limit", c.Faults.RateLimit}, {"faults.server_error", c.Faults.ServerError},
		{"faults.reset", c.Faults.Reset}, {"faults.truncated", c.Faults.Truncated},
		{"faults.slow", c.Faults.Slow}, {"faults.garbage", c.Faults.Garbage},
	}
	inRange := true
	for _, r := range rates {
		if !(r.p >= 0 && r.p <= 1) {
			bad(r.key, "%v is outside [0, 1]", r.p)
			inRange = false
		}
	}
	if s := c.Faults.sum(); inRange && s > 1+1e-9 {
		bad("faults", "rates add up to %v, more than 1", s)
	}
	if c.SlowDelay < 0 {
		bad("slow_delay", "%v is negative", c.SlowDelay)
	}
	if c.RetryAfter < 0 {
		bad("retry_after", "%v is negative", c.RetryAfter)
	}
	if strings.TrimSpace(c.Model) == "" {
		bad("model", "empty")
	}
	if c.ToolCalls < 1 || c.ToolCalls > maxCalls {
		bad("tool_calls", "%d is outside [1, %d]", c.ToolCalls, maxCalls)
	}
	if c.Subtasks < 1 || c.Subtasks > maxCalls {
		bad("subtasks", "%d is outside [1, %d]", c.Subtasks, maxCalls)
	}
	if c.ReplyBytes < 0 || c.ReplyBytes > maxReplyBytes {
		bad("reply_bytes", "%d is outside [0, %d]", c.ReplyBytes, maxReplyBytes)
	}
	if len(errs) > 0 {
		return fmt.Errorf("standin config: %w", errors.Join(errs...))
	}
	return nil
}
