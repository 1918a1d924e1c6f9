package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "delegate",
		Short:         "Run, measure and train LLMs that delegate work to other models",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newConfigCmd())
	return root
}

func newConfigCmd() *cobra.Command {
	cfg := &cobra.Command{Use: "config", Short: "Work with config files"}
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Validate a config file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := LoadConfig(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d models)\n", args[0], len(c.Models))
			return nil
		},
	}
	cfg.AddCommand(check)
	return cfg
}
