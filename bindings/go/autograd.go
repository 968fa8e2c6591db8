package deft

/*
#include "shim.h"
*/
import "C"

import "runtime"

// withMode runs fn with a per-thread mode set to on, on one locked OS
// thread, and restores the previous value after.
func withMode(set func(*C.go_status, C.int, *C.int) C.int, on bool, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var st C.go_status
	var prev C.int
	flag := C.int(0)
	if on {
		flag = 1
	}
	if set(&st, flag, &prev) != 0 {
		return fail(&st)
	}
	defer func() {
		var restore C.go_status
		set(&restore, prev, &prev)
	}()
	return fn()
}

func setDeferred(st *C.go_status, on C.int, prev *C.int) C.int {
	return C.go_set_deferred(st, on, prev)
}
func setRecording(st *C.go_status, on C.int, prev *C.int) C.int {
	return C.go_set_recording(st, on, prev)
}
func setTraining(st *C.go_status, on C.int, prev *C.int) C.int {
	return C.go_set_training(st, on, prev)
}

// WithDeferredCompute runs fn with deferred compute on: operator calls record
// a graph and return lazy arrays, computed when read.
func WithDeferredCompute(fn func() error) error { return withMode(setDeferred, true, fn) }

// WithRecording runs fn with autograd recording on, in training mode
// (MXNet's autograd.record, Python's deft.autograd.record()).
func WithRecording(fn func() error) error {
	return withMode(setRecording, true, func() error { return withMode(setTraining, true, fn) })
}

// WithoutRecording runs fn with autograd recording off, in prediction mode,
// inside a recording scope too (MXNet's autograd.pause, Python's
// deft.autograd.pause()).
func WithoutRecording(fn func() error) error {
	return withMode(setRecording, false, func() error { return withMode(setTraining, false, fn) })
}

// IsRecording reports whether calls on this thread are recorded for autograd.
// The mode is per OS thread: ask inside a With... scope, which locks it.
func IsRecording() (bool, error) {
	return readMode(func(st *C.go_status, on *C.int) C.int { return C.go_is_recording(st, on) })
}

// IsTraining reports whether this thread is in training mode (see IsRecording).
func IsTraining() (bool, error) {
	return readMode(func(st *C.go_status, on *C.int) C.int { return C.go_is_training(st, on) })
}

func readMode(get func(*C.go_status, *C.int) C.int) (bool, error) {
	var st C.go_status
	var on C.int
	if get(&st, &on) != 0 {
		return false, fail(&st)
	}
	return on != 0, nil
}

// WithTraining runs fn in training mode: Dropout drops, BatchNorm uses the
// batch's statistics (MXNet's train_mode).
func WithTraining(fn func() error) error { return withMode(setTraining, true, fn) }

// WithPredicting runs fn in prediction mode (MXNet's predict_mode).
func WithPredicting(fn func() error) error { return withMode(setTraining, false, fn) }

// GradReq is how Backward stores a variable's gradient.
type GradReq int

const (
	GradNull  GradReq = 0 // no gradient
	GradWrite GradReq = 1 // overwrite the gradient array
	GradAdd   GradReq = 2 // add to it (accumulate over calls)
)

// AttachGrad makes a a variable; Backward writes its gradient into the result.
func (a *NDArray) AttachGrad() (*NDArray, error) { return a.AttachGradReq(GradWrite) }

// AttachGradReq makes a a variable whose gradient is stored as req says.
func (a *NDArray) AttachGradReq(req GradReq) (*NDArray, error) {
	grads, err := Invoke("zeros_like", []*NDArray{a})
	if err != nil {
		return nil, err
	}
	h, err := a.raw()
	if err != nil {
		return nil, err
	}
	g := grads[0]
	defer runtime.KeepAlive(a)
	defer runtime.KeepAlive(g)
	var st C.go_status
	if C.go_mark(&st, h, C.int(req), g.h) != 0 {
		g.Close()
		return nil, fail(&st)
	}
	return g, nil
}

// Backward computes the gradients of heads into the variables' gradient arrays.
func Backward(heads ...*NDArray) error { return BackwardWith(heads, nil, false) }

// BackwardWith is Backward with head gradients (nil: ones) and retainGraph,
// which keeps the recorded graph for another backward pass.
func BackwardWith(heads, headGrads []*NDArray, retainGraph bool) error {
	hs, err := handles(heads)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(heads)
	var gs *C.DeftNDArrayHandle
	if headGrads != nil {
		g, err := handles(headGrads)
		if err != nil {
			return err
		}
		defer runtime.KeepAlive(headGrads)
		gs = &g[0]
	}
	var st C.go_status
	if C.go_backward(&st, C.int(len(heads)), &hs[0], gs, boolInt(retainGraph)) != 0 {
		return fail(&st)
	}
	return nil
}

// Grad returns the gradients of heads with respect to variables (marked
// with AttachGrad) as new arrays, leaving the variables' gradient arrays alone.
func Grad(heads, variables []*NDArray, retainGraph bool) ([]*NDArray, error) {
	hs, err := handles(heads)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(heads)
	vs, err := handles(variables)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(variables)
	out := make([]C.DeftNDArrayHandle, len(variables)+1)
	var st C.go_status
	if C.go_grad(&st, C.int(len(heads)), &hs[0], C.int(len(variables)), &vs[0],
		boolInt(retainGraph), &out[0]) != 0 {
		return nil, fail(&st)
	}
	grads := make([]*NDArray, len(variables))
	for i := range grads {
		grads[i] = wrapArray(out[i])
	}
	return grads, nil
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
