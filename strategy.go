package delegate

import "context"

// Strategy runs one request through a way of delegating (or not) and
// returns its trace. Model failures are recorded in the trace, not
// returned: the error is for what stops the run itself (a cancelled
// context). Run may be called from many goroutines at once.
type Strategy interface {
	Name() string
	Run(ctx context.Context, request string, events chan<- Event) (*Trace, error)
}
