// Command delegate runs, measures and trains LLMs that delegate work to
// other models. It parses flags, config files and the environment, and
// wires the packages below it. See the README for the commands.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd(os.Getenv, log).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "delegate:", err)
		stop()
		os.Exit(1)
	}
}
