//go:build !amd64 || purego

package kernel

// Without the assembly the portable loops are the only ones.
var (
	archRMSApply rmsApplyFunc
	archRMSInput rmsInputFunc
	archRMSGain  rmsGainFunc
)
