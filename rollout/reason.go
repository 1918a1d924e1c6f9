package rollout

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/judge"
)

// Reasons a rollout failed, as Summary.Failed counts them. A failed model
// call is counted by what the server did, "call <kind>": its API error kind
// (rate_limit, server_error, status_NNN for another status, timeout,
// connection, decode) or "other" when the error carries none; a failed
// scoring "score <kind>" the same way, "score unparseable" when no judge
// answer parsed.
const (
	FailPanic     = "panic"      // the strategy or the scorer panicked (a bug)
	FailNoTrace   = "no_trace"   // the strategy returned no trace
	FailRun       = "run"        // the strategy returned an error
	FailNonFinite = "non_finite" // the scorer's reward was NaN or infinite
)

// API error kinds in failure reasons.
const (
	kindRateLimit   = "rate_limit"
	kindServerError = "server_error"
	kindOther       = "other"
)

// apiKind names the kind of a model call error: from its *delegate.APIError
// when it has one.
func apiKind(err error) string {
	return kindOfAPIError(delegate.ErrorClass(err))
}

func kindOfAPIError(status int, typ string) string {
	switch {
	case status == 429:
		return kindRateLimit
	case status >= 500:
		return kindServerError
	case typ == delegate.ErrKindTimeout, typ == delegate.ErrKindConnection, typ == delegate.ErrKindDecode, typ == delegate.ErrKindCanceled:
		// A 200 whose body did not decode carries its status too.
		return typ
	case status != 0:
		return "status_" + strconv.Itoa(status)
	}
	return kindOther
}

// apiErrorText matches the renderings of delegate.APIError.Error. They
// read like these:
//
//	model api error (model m): status 429 Too Many Requests: type: ...
//	model api error (model m): status 200 OK: decode: ...
//	model api error (model m): timeout: ...
var apiErrorText = regexp.MustCompile(`model api error(?: \(model .*?\))?: (?:status (\d{3})[^:]*(?:: |$))?([a-z_]+)?`)

// apiKindText is apiKind for an error that survives only as text.
// A strategy records a failed call in its trace as the error's message.
// It reads the last API error rendered in s, for reporting only; retry decisions never look at text.
func apiKindText(s string) string {
	m := apiErrorText.FindAllStringSubmatch(s, -1)
	if len(m) == 0 {
		return kindOther
	}
	last := m[len(m)-1]
	status := 0
	if last[1] != "" {
		// Three digits always parse.
		status, _ = strconv.Atoi(last[1])
	}
	return kindOfAPIError(status, last[2])
}

// callFailure is the reason of a rollout whose trace failed a call.
func callFailure(failure string) string { return "call " + apiKindText(failure) }

// traceCallFailure is the reason of a rollout whose trace t failed a call.
// It is the kind of the last failed call, from the status and type its node keeps.
// Traces from before those fields existed fall back to the text.
func traceCallFailure(t *delegate.Trace) string {
	calls := t.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		n := calls[i]
		if n.Error == "" {
			continue
		}
		if n.ErrorStatus != 0 || n.ErrorType != "" {
			return "call " + kindOfAPIError(n.ErrorStatus, n.ErrorType)
		}
		return callFailure(n.Error)
	}
	return callFailure(t.Failure)
}

// scoreFailure is the reason of a rollout whose scorer returned err.
func scoreFailure(err error) string {
	if errors.Is(err, judge.ErrUnparseable) {
		return "score unparseable"
	}
	var ae *delegate.APIError
	if errors.As(err, &ae) {
		return "score " + apiKind(err)
	}
	// A scorer may have flattened the error to text.
	return "score " + apiKindText(err.Error())
}

// isCallFailure reports whether a trace failed because a call it needed
// failed.
func isCallFailure(t *delegate.Trace) bool {
	return t.FailureKind == delegate.FailureCall
}

// reasonOf returns a stored rollout's failure reason; states written
// before reasons were recorded get one from their error text.
func reasonOf(reason, errText string) string {
	switch {
	case reason != "":
		return reason
	case strings.HasPrefix(errText, "panic"):
		return FailPanic
	case strings.HasPrefix(errText, "score"):
		return "score " + apiKindText(errText)
	}
	return "call " + apiKindText(errText)
}
