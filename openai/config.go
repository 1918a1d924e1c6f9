package openai

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/delegatelab/delegate"
)

// Config describes one model behind an OpenAI-compatible endpoint.
// DefaultConfig holds the defaults; a zero field means zero.
type Config struct {
	// BaseURL is the API root, usually ending in "/v1"; the client posts to
	// BaseURL + "/chat/completions". Required; http or https.
	BaseURL string
	// Replicas are further API roots serving the same model (replicas of
	// one inference server, as RL runs deploy them). Each attempt goes to
	// the least-busy healthy one of BaseURL and Replicas; a replica whose
	// attempt failed with a connection error or a 5xx is set aside for a
	// while (doubling from one second up to MaxBackoff) and tried again
	// after it. Each must pass the checks of BaseURL.
	Replicas []string
	// APIKey is sent as "Authorization: Bearer <key>". It may be empty for
	// local servers. It never appears in errors, logs or String output:
	// error messages that echo it are redacted.
	APIKey string
	// Model is the model name sent in every request. Required.
	Model string
	// Timeout bounds one attempt, from sending the request to the end of
	// the decoded body. It must be positive.
	Timeout time.Duration
	// MaxRetries is the number of attempts after the first; 0 retries
	// nothing.
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff between attempts.
	// Before retry k, counted from 1, the client waits a uniformly random duration
	// in [0, min(MaxBackoff, MinBackoff*2^(k-1))]: full jitter.
	// 0 waits nothing; MinBackoff must not exceed MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxConcurrency bounds the attempts in flight to this model at once
	// across all goroutines using the Client. 0 means unlimited.
	MaxConcurrency int
	// RequestsPerMinute bounds the rate of attempts sent to this model. The
	// limiter allows a burst of one second's worth of requests (at least
	// one). 0 means unlimited.
	RequestsPerMinute float64
	// TokenIDs asks vLLM, whenever a request wants logprobs, to return
	// tokens as "token_id:N" (return_tokens_as_token_ids) and parses the
	// ids into TokenLogprob.TokenID. Leave it off for servers other than
	// vLLM, which reject or ignore the field.
	TokenIDs bool
	// FillIDs, when set, fills in the token ids the backend did not return in a successful response.
	// tokenizer.IDFiller does so with the policy's own tokenizer.
	// It must leave ids it cannot vouch for at -1.
	FillIDs func(req *delegate.Request, resp *delegate.Response) error
}

// DefaultConfig returns the defaults: attempts of at most 120s, 4 retries,
// backoff from 500ms up to 30s. BaseURL and Model are left to set.
func DefaultConfig() Config {
	return Config{Timeout: 120 * time.Second, MaxRetries: 4, MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second}
}

// Validate reports the first problem with c, naming the field.
func (c Config) Validate() error {
	if c.BaseURL == "" {
		return errors.New("openai config: base_url is empty")
	}
	for i, b := range append([]string{c.BaseURL}, c.Replicas...) {
		field := "base_url"
		if i > 0 {
			field = fmt.Sprintf("replicas[%d]", i-1)
		}
		if err := checkBaseURL(field, b); err != nil {
			return err
		}
	}
	if strings.TrimSpace(c.Model) == "" {
		return errors.New("openai config: model is empty")
	}
	for i := 0; i < len(c.APIKey); i++ {
		if b := c.APIKey[i]; b < 0x20 || b == 0x7f {
			// Do not quote the key: it is secret.
			return fmt.Errorf("openai config: api key for model %q has a control character at byte %d", c.Model, i)
		}
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("openai config: timeout %v: want a positive duration", c.Timeout)
	}
	if c.MaxRetries < 0 {
		return fmt.Errorf("openai config: max_retries %d is negative (0 retries nothing)", c.MaxRetries)
	}
	if c.MinBackoff < 0 {
		return fmt.Errorf("openai config: min_backoff %v is negative", c.MinBackoff)
	}
	if c.MaxBackoff < 0 {
		return fmt.Errorf("openai config: max_backoff %v is negative", c.MaxBackoff)
	}
	if c.MinBackoff > c.MaxBackoff {
		return fmt.Errorf("openai config: min_backoff %v exceeds max_backoff %v", c.MinBackoff, c.MaxBackoff)
	}
	if c.MaxConcurrency < 0 {
		return fmt.Errorf("openai config: max_concurrency %d is negative", c.MaxConcurrency)
	}
	if c.RequestsPerMinute < 0 || math.IsNaN(c.RequestsPerMinute) || math.IsInf(c.RequestsPerMinute, 0) {
		return fmt.Errorf("openai config: requests_per_minute %v: want a finite number >= 0", c.RequestsPerMinute)
	}
	return nil
}

// checkBaseURL checks one API root; field names it in the error.
func checkBaseURL(field, b string) error {
	u, err := url.Parse(b)
	if err != nil {
		// url.Parse errors quote the input; the base URL is not secret.
		return fmt.Errorf("openai config: %s: %w", field, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("openai config: %s %q: scheme must be http or https", field, b)
	}
	if u.Host == "" {
		return fmt.Errorf("openai config: %s %q: no host", field, b)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("openai config: %s %q: must not have a query or fragment", field, b)
	}
	return nil
}

// String describes c for people, with the API key redacted.
func (c Config) String() string {
	return fmt.Sprintf("openai.Config{BaseURL:%q Model:%q APIKey:%s Timeout:%v MaxRetries:%d MinBackoff:%v MaxBackoff:%v MaxConcurrency:%d RequestsPerMinute:%v TokenIDs:%v}",
		c.BaseURL, c.Model, redactedKey(c.APIKey), c.Timeout, c.MaxRetries, c.MinBackoff, c.MaxBackoff, c.MaxConcurrency, c.RequestsPerMinute, c.TokenIDs)
}

// GoString is String, so that %#v does not print the API key either.
func (c Config) GoString() string { return c.String() }

// LogValue makes slog print c with the API key redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", c.BaseURL),
		slog.String("model", c.Model),
		slog.String("api_key", redactedKey(c.APIKey)),
		slog.Duration("timeout", c.Timeout),
		slog.Int("max_retries", c.MaxRetries),
		slog.Int("max_concurrency", c.MaxConcurrency),
		slog.Float64("requests_per_minute", c.RequestsPerMinute),
		slog.Bool("token_ids", c.TokenIDs),
	)
}

func redactedKey(key string) string {
	if key == "" {
		return `""`
	}
	return "[redacted]"
}
