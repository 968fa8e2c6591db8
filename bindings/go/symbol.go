package deft

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Symbol is a symbolic graph: exported from deferred compute or loaded from JSON.
type Symbol struct {
	handle
	h C.DeftSymbolHandle
}

func wrapSymbol(h C.DeftSymbolHandle) *Symbol {
	s := &Symbol{h: h}
	runtime.SetFinalizer(s, func(s *Symbol) { s.Close() })
	return s
}

// Close releases the symbol's handle. A second Close returns ErrClosed.
func (s *Symbol) Close() error {
	return s.release(s, func(st *C.go_status) C.int { return C.go_symbol_free(st, s.h) })
}

// Named pairs a name with an array, for Export.
type Named struct {
	Name  string
	Array *NDArray
}

func split(items []Named) ([]C.DeftNDArrayHandle, []*C.char, func(), error) {
	arrays := make([]*NDArray, len(items))
	names := make([]string, len(items))
	for i, it := range items {
		arrays[i], names[i] = it.Array, it.Name
	}
	hs, err := handles(arrays)
	if err != nil {
		return nil, nil, func() {}, err
	}
	cnames, free := cStrings(names)
	return hs, cnames, free, nil
}

// Export returns the recorded graph from inputs to outputs as a Symbol whose
// arguments are the input names, in order.
func Export(inputs, outputs []Named) (*Symbol, error) {
	in, inNames, freeIn, err := split(inputs)
	defer freeIn()
	if err != nil {
		return nil, err
	}
	out, outNames, freeOut, err := split(outputs)
	defer freeOut()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(inputs)
	defer runtime.KeepAlive(outputs)
	var st C.go_status
	var h C.DeftSymbolHandle
	if C.go_export(&st, &in[0], &out[0], &inNames[0], &outNames[0], C.int(len(inputs)),
		C.int(len(outputs)), &h) != 0 {
		return nil, fail(&st)
	}
	return wrapSymbol(h), nil
}

// SymbolFromJSON loads a symbol saved by JSON (or MXNet's symbol JSON).
func SymbolFromJSON(text string) (*Symbol, error) {
	c := C.CString(text)
	defer C.free(unsafe.Pointer(c))
	var st C.go_status
	var h C.DeftSymbolHandle
	if C.go_symbol_from_json(&st, c, &h) != 0 {
		return nil, fail(&st)
	}
	return wrapSymbol(h), nil
}

// names lists arguments (which 0), outputs (1) or auxiliary states (2).
func (s *Symbol) names(which int) ([]string, error) {
	s.mu.Lock() // the handle keeps the returned strings: one caller at a time
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var st C.go_status
	var n C.int
	var names **C.char
	if C.go_symbol_names(&st, s.h, C.int(which), &n, &names) != 0 {
		return nil, fail(&st)
	}
	list := unsafe.Slice(names, int(n))
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(list[i])
	}
	return out, nil
}

// ListInputs returns the argument names, in order.
func (s *Symbol) ListInputs() ([]string, error) { return s.names(0) }

// ListOutputs returns the output names, in order.
func (s *Symbol) ListOutputs() ([]string, error) { return s.names(1) }

// ListAuxiliaryStates returns the names of the states the graph updates in
// place (BatchNorm's running statistics, a training step's optimizer states).
func (s *Symbol) ListAuxiliaryStates() ([]string, error) { return s.names(2) }

// TrainStep returns the training step of the loss s (its output 0): one run of
// the step's CachedOp computes the loss, its gradient with respect to params
// and the optimizer's update of each parameter, in place. optimizer is "sgd",
// "sgd_mom", "adam" or "adamw". The step's inputs are s's, then "step_hyper"
// (float64, 7 values: lr, wd, rescale_grad, clip_gradient (negative: none),
// momentum or beta1, beta2, epsilon); its auxiliary states are s's, then each
// parameter's optimizer states "<param>_mom", or "<param>_mean" and
// "<param>_var", zeros before the first step. Its outputs are s's, then one
// empty array. See DeftSymbolTrainStep in deft/symbol.h.
func (s *Symbol) TrainStep(optimizer string, params ...string) (*Symbol, error) {
	names, free := cStrings(params)
	defer free()
	opt := C.CString(optimizer)
	defer C.free(unsafe.Pointer(opt))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	var st C.go_status
	var h C.DeftSymbolHandle
	if C.go_symbol_train_step(&st, s.h, C.int(len(params)), &names[0], opt, &h) != 0 {
		return nil, fail(&st)
	}
	return wrapSymbol(h), nil
}

// JSON returns the graph as MXNet-compatible JSON.
func (s *Symbol) JSON() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", ErrClosed
	}
	var st C.go_status
	var text *C.char
	if C.go_symbol_json(&st, s.h, &text) != 0 {
		return "", fail(&st)
	}
	return C.GoString(text), nil
}

// CachedOpFlags choose how NewCachedOpWith compiles a symbol.
type CachedOpFlags int

const (
	// NoMemoryPlan gives every entry a buffer of its own (for comparison).
	NoMemoryPlan CachedOpFlags = 1
	// WithBackward runs forward and backward in one run: the inputs are the
	// arguments, a head gradient for each output whose gradient reads one,
	// then the auxiliary states; the outputs are the symbol's, then the
	// gradient of each argument (see DEFT_CACHED_OP_BACKWARD).
	WithBackward CachedOpFlags = 2
	// Fuse applies the "Fuse" pass before planning.
	Fuse CachedOpFlags = 4
)

// CachedOp is a symbol compiled to a memory-planned executor.
type CachedOp struct {
	handle
	h       C.DeftCachedOpHandle
	outputs int
}

// NewCachedOp compiles s.
func NewCachedOp(s *Symbol) (*CachedOp, error) { return NewCachedOpWith(s, 0) }

// NewCachedOpWith compiles s with flags.
func NewCachedOpWith(s *Symbol, flags CachedOpFlags) (*CachedOp, error) {
	outs, err := s.ListOutputs()
	if err != nil {
		return nil, err
	}
	count := len(outs)
	if flags&WithBackward != 0 {
		args, err := s.ListInputs()
		if err != nil {
			return nil, err
		}
		count += len(args)
	}
	var st C.go_status
	var h C.DeftCachedOpHandle
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	status := C.go_cached_op(&st, s.h, C.int(flags), &h)
	s.mu.Unlock()
	if status != 0 {
		return nil, fail(&st)
	}
	op := &CachedOp{h: h, outputs: count}
	runtime.SetFinalizer(op, func(op *CachedOp) { op.Close() })
	return op, nil
}

// Close releases the executor. A second Close returns ErrClosed.
func (op *CachedOp) Close() error {
	return op.release(op, func(st *C.go_status) C.int { return C.go_cached_op_free(st, op.h) })
}

// Call runs the graph on its arguments (ListInputs order), then its
// auxiliary states, and returns its outputs.
func (op *CachedOp) Call(inputs ...*NDArray) ([]*NDArray, error) {
	in, err := handles(inputs)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(inputs)
	out := make([]C.DeftNDArrayHandle, op.outputs+1)
	nout := C.int(op.outputs)
	var st C.go_status
	var live C.int64_t
	op.mu.Lock() // also keeps op reachable through the call
	if op.closed {
		op.mu.Unlock()
		return nil, ErrClosed
	}
	status := C.go_cached_op_invoke(&st, op.h, C.int(len(inputs)), &in[0], &nout, &out[0], &live)
	op.mu.Unlock()
	if status != 0 {
		return nil, fail(&st)
	}
	notePressure(int64(live))
	results := make([]*NDArray, nout)
	for i := range results {
		results[i] = wrapArray(out[i])
	}
	return results, nil
}
