package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is one child process of a supervised topology.
type child struct {
	// name prefixes its lines ("api", "env 1").
	name string
	// args follow the executable.
	args []string
	// env is added to this process's environment (secrets go here, not
	// in args, which ps shows).
	env []string
	// finishes makes an exit with status 0 the child's end, not a death
	// to restart. An environment that wrote its items ends so, as does a
	// trainer that took its steps.
	finishes bool
}

// supervisor runs child processes of one executable, each in its own
// process group. It streams their output line by line with a prefix. It
// restarts a child that dies unexpectedly, with backoff, at most
// maxRestarts times. Its methods may run concurrently.
type supervisor struct {
	exe string
	out io.Writer // every child's lines and the supervisor's own

	grace       time.Duration // between SIGTERM and SIGKILL when stopping a child
	maxRestarts int           // per child
	backoff     time.Duration // before the first restart; doubles up to maxBackoff
	maxBackoff  time.Duration

	// started, when set, receives (name, pid) of every start. The send
	// never blocks and drops what it cannot deliver. Tests kill children
	// by pid.
	started chan<- startEvent

	mu sync.Mutex // serialises writes to out
}

// startEvent says a child started with a pid.
type startEvent struct {
	name string
	pid  int
}

// printf writes one line of the supervisor's own.
func (s *supervisor) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "[supervisor] "+format+"\n", args...)
}

// stream copies r to out, one line at a time, each behind prefix.
func (s *supervisor) stream(prefix string, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if line[len(line)-1] != '\n' {
				line += "\n"
			}
			s.mu.Lock()
			_, _ = io.WriteString(s.out, prefix+line) // the supervisor's output going away stops nothing
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// run keeps c running until ctx ends, c finishes, or c dies too often.
// When ctx ends it sends SIGTERM to c's process group, then SIGKILL after
// the grace period, and returns ctx's error. When c finishes it returns
// nil. After more than maxRestarts deaths it returns an error naming c
// and its last exit.
func (s *supervisor) run(ctx context.Context, c child) error {
	backoff := s.backoff
	for restarts := 0; ; restarts++ {
		err := s.once(ctx, c)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && c.finishes {
			s.printf("%s finished", c.name)
			return nil
		}
		why := "exited with status 0"
		if err != nil {
			why = err.Error()
		}
		if restarts >= s.maxRestarts {
			return fmt.Errorf("%s: %s, after %d restarts", c.name, why, restarts)
		}
		s.printf("%s died unexpectedly (%s); restart %d of %d in %s", c.name, why, restarts+1, s.maxRestarts, backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.maxBackoff)
	}
}

// once starts c and waits for it to exit, stopping it when ctx ends.
func (s *supervisor) once(ctx context.Context, c child) error {
	cmd := exec.Command(s.exe, c.args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.SysProcAttr = childAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	pid := cmd.Process.Pid
	began := time.Now()
	s.printf("%s started (pid %d): %s", c.name, pid, strings.Join(c.args, " "))
	if s.started != nil {
		select {
		case s.started <- startEvent{c.name, pid}:
		default:
		}
	}
	prefix := "[" + c.name + "] "
	var streams sync.WaitGroup
	streams.Go(func() { s.stream(prefix, stdout) })
	streams.Go(func() { s.stream(prefix, stderr) })

	exited := make(chan struct{})
	var stopper sync.WaitGroup
	stopper.Go(func() {
		select {
		case <-exited:
			return
		case <-ctx.Done():
		}
		// The whole group: a child's own children go with it.
		_ = killGroup(pid, syscall.SIGTERM) // ESRCH: it is gone already
		select {
		case <-exited:
		case <-time.After(s.grace):
			s.printf("%s did not stop within %s of SIGTERM; SIGKILL", c.name, s.grace)
			_ = killGroup(pid, syscall.SIGKILL) // ESRCH: it is gone already
		}
	})
	// Wait reads the pipes to their end only after the streams are done:
	// the pipes close when the process and anything holding them exit.
	streams.Wait()
	err = cmd.Wait()
	close(exited)
	stopper.Wait()
	// Whatever of its group outlived it goes too.
	_ = killGroup(pid, syscall.SIGKILL) // ESRCH: the group is empty, as it should be
	if ps := cmd.ProcessState; ps != nil {
		// What each part of the loop cost, for perf/topology and for
		// anyone wondering where a run's time went.
		s.printf("%s used %.2f s of CPU in %.2f s (user %.2f, system %.2f)", c.name,
			(ps.UserTime() + ps.SystemTime()).Seconds(), time.Since(began).Seconds(), ps.UserTime().Seconds(), ps.SystemTime().Seconds())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%s", exit.ProcessState.String())
	}
	return err
}
