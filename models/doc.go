// Package models holds the shipped checkpoints of the world's two local
// models, written by delegate pretrain (see README.md in this directory
// for the command and the measured accuracies): solver/ and delegator/,
// each a checkpoint of package nn, also embedded in the binary (Load). Its
// test loads the checkpoints and checks their held-out accuracy.
package models
