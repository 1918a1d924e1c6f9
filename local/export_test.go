package local

// HeldBack exports heldBack to the tests.
var HeldBack = heldBack
