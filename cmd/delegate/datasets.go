package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/dataset"
	"github.com/delegatelab/delegate/world"
)

// datasetOpen is the open-ended requests, read from a JSONL file. With no
// --data it is the built-in ones: dataset.Builtin, a train and a test
// split.
const datasetOpen = "open"

// datasetNames lists the --dataset values for messages.
const datasetNames = "gsm8k, math, mmlu, bbh, open or world"

// datasetFlags are the flags that choose a command's tasks. Bench and
// process both embed this one set in their flags and load it the same
// way:
//
//	--dataset NAME   gsm8k, math, mmlu, bbh, open or world (required)
//	--data PATH      the file (a directory for mmlu, bbh); required but
//	                 for open (no file: the built-in requests) and world
//	--split S        the built-in open requests' split (train, test) or
//	                 the world's (train, validation, test)
//	-n, --n N        items to sample (0: all; required with world)
//	--seed S         seed of the sample and of the world's problems
//	--skip-bad       leave malformed records out, listing each
//	--max-record B   the largest dataset record in bytes (1 MiB)
//	--level, --distractors   the world's (worldFlags)
type datasetFlags struct {
	dataset string
	data    string
	split   string
	n       int
	seed    uint64
	skipBad bool
	maxRec  int
	world   worldFlags
}

// register adds the flags to cmd. split is the command's default split:
// train for process, which makes training data; "" for bench, which
// evaluates: the world's validation problems (a test read is asked for by
// name, so that each one is deliberate) and the built-in test requests.
func (d *datasetFlags) register(cmd *cobra.Command, split string) {
	fl := cmd.Flags()
	fl.StringVarP(&d.dataset, "dataset", "d", "", "dataset: "+datasetNames)
	fl.StringVar(&d.data, "data", "", "dataset file (a directory for mmlu, bbh); open without it: the built-in open-ended requests; not used with world")
	help := "open without --data: the built-in train or test requests; world: train, validation or test problems"
	if split == "" {
		help += " (default: world validation, open test)"
	}
	fl.StringVar(&d.split, "split", split, help)
	fl.IntVarP(&d.n, "n", "n", 0, "items to sample from the dataset (0: all; required with world)")
	fl.Uint64Var(&d.seed, "seed", 1, "seed of the sample (and of the world's problems)")
	fl.BoolVar(&d.skipBad, "skip-bad", false, "leave malformed dataset records out, listing each, instead of failing")
	fl.IntVar(&d.maxRec, "max-record", dataset.DefaultMaxRecord, "the largest dataset record in bytes (a JSONL line, a CSV record, a BBH example); a larger one is malformed")
	d.world.register(cmd)
}

// validate checks the flags among themselves, before anything is read.
func (d *datasetFlags) validate() error {
	var errs []error
	if d.split == "" {
		d.split = "test"
		if d.dataset == datasetWorld {
			d.split = "validation"
		}
	}
	switch d.dataset {
	case "":
		errs = append(errs, errors.New("--dataset is required ("+datasetNames+")"))
	case "gsm8k", "math", "mmlu", "bbh":
		if d.data == "" {
			errs = append(errs, fmt.Errorf("--data is required for --dataset %s: the dataset file (or directory)", d.dataset))
		}
	case datasetOpen:
		if d.data == "" && d.split != "train" && d.split != "test" {
			errs = append(errs, fmt.Errorf("--split %q: the built-in open requests have train and test", d.split))
		}
	case datasetWorld:
		if d.data != "" {
			errs = append(errs, errors.New("--data is not used with --dataset world: its problems are drawn by --level, --split, --n and --seed"))
		}
		if d.n <= 0 {
			errs = append(errs, errors.New("--n is required with --dataset world: the world draws problems without end"))
		}
		if _, err := d.world.config(); err != nil {
			errs = append(errs, err)
		}
		if _, err := world.ParseSplit(d.split); err != nil {
			errs = append(errs, fmt.Errorf("--split: %w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("--dataset %q: unknown dataset (want %s)", d.dataset, datasetNames))
	}
	if d.n < 0 {
		errs = append(errs, fmt.Errorf("--n: %d is negative", d.n))
	}
	if d.maxRec < 0 {
		errs = append(errs, fmt.Errorf("--max-record: %d is negative", d.maxRec))
	}
	return errors.Join(errs...)
}

// load reads and samples the tasks, and returns them with a description
// for reports. It writes to w what it read and every record it skipped.
// A description reads "gsm8k (PATH), 8 of 12 items sampled with seed 3".
func (d *datasetFlags) load(w io.Writer) ([]delegate.Task, string, error) {
	if err := d.validate(); err != nil {
		return nil, "", err
	}
	var (
		all  []delegate.Task
		desc string
	)
	switch {
	case d.dataset == datasetWorld:
		return worldTasks(d.world, d.split, d.seed, d.n)
	case d.dataset == datasetOpen && d.data == "":
		train, test := dataset.Builtin()
		all = test
		if d.split == "train" {
			all = train
		}
		desc = fmt.Sprintf("open (built-in %s requests)", d.split)
	default:
		tasks, rep, err := dataset.Load(d.dataset, d.data, dataset.Options{SkipBad: d.skipBad, MaxRecord: d.maxRec})
		if err != nil {
			var re *dataset.RecordError
			if errors.Is(err, dataset.ErrTooLarge) {
				return nil, "", fmt.Errorf("load dataset: %w (--max-record sets the limit; --skip-bad leaves such records out)", err)
			}
			if errors.As(err, &re) && !d.skipBad {
				return nil, "", fmt.Errorf("load dataset: %w (--skip-bad leaves malformed records out)", err)
			}
			return nil, "", fmt.Errorf("load dataset: %w", err)
		}
		for _, s := range rep.Skipped {
			fmt.Fprintf(w, "skipped %s:%d: %s\n", s.File, s.Line, s.Reason)
		}
		fmt.Fprintf(w, "dataset %s %s: %d records read, %d malformed skipped\n", d.dataset, d.data, rep.Read, len(rep.Skipped))
		all = tasks
		desc = fmt.Sprintf("%s (%s", d.dataset, d.data)
		if len(rep.Skipped) > 0 {
			desc += fmt.Sprintf(", %d malformed records skipped", len(rep.Skipped))
		}
		desc += ")"
	}
	switch {
	case len(all) == 0:
		return nil, "", errors.New("load dataset: the dataset has no tasks")
	case d.n > len(all):
		return nil, "", fmt.Errorf("--n %d, but the dataset has %d tasks", d.n, len(all))
	case d.n > 0:
		tasks := dataset.Sample(all, d.n, d.seed)
		return tasks, desc + fmt.Sprintf(", %d of %d items sampled with seed %d", len(tasks), len(all), d.seed), nil
	}
	return all, desc + fmt.Sprintf(", all %d items", len(all)), nil
}
