// Package models holds the shipped checkpoints of the world's local
// models, written by delegate pretrain (see README.md in this directory
// for the commands and the measured accuracies): solver/, delegator/,
// peer/ (an earlier phase of the delegator, MLPO's second peer model),
// planner/ (the delegator trained further on two-part problems, where
// delegate train --mode decompose starts) and router/ (the planner trained
// further under route on the default world, where delegate train
// starts), each a checkpoint of package nn, also embedded in the binary (Load). Its test loads the checkpoints
// and checks their held-out accuracy.
package models
