// Package models holds the shipped checkpoints of the world's local models.
// Each is a checkpoint of package nn written by delegate pretrain, and each
// is embedded in the binary so that Load works from any directory. The
// solver answers delegated steps. The delegator is the base of the others.
// peer is an earlier phase of it, MLPO's second peer. planner is it trained
// further on two-part problems, where decompose starts. router is the
// planner trained further under route, where delegate train starts.
// solver-weak is the solver's recipe stopped early, a solver RL of the
// solver has something to teach. solver-mid is it stopped later, between
// solver-weak and the solver, for training both roles. The tests check
// each model's held-out accuracy. README.md in this directory
// keeps the commands that made them and their measured accuracies.
package models
