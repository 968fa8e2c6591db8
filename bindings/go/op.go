package deft

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Op is a registered operator, looked up once by name.
type Op struct {
	h    C.DeftOpHandle
	name string
}

var ops sync.Map // name -> *Op; operators live as long as the process

// lookupOp finds an operator by name, asking C only the first time.
func lookupOp(name string) (*Op, error) {
	if op, ok := ops.Load(name); ok {
		return op.(*Op), nil
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var st C.go_status
	var h C.DeftOpHandle
	if C.go_get_op(&st, cname, &h) != 0 {
		return nil, fail(&st)
	}
	op, _ := ops.LoadOrStore(name, &Op{h: h, name: name})
	return op.(*Op), nil
}

// frame is a go_call in C memory, reused through a pool; the finalizer
// frees it when the pool drops it.
type frame struct{ c *C.go_call }

var frames = sync.Pool{New: func() interface{} {
	f := &frame{c: (*C.go_call)(C.calloc(1, C.sizeof_go_call))}
	runtime.SetFinalizer(f, func(f *frame) { C.free(unsafe.Pointer(f.c)) })
	return f
}}

// packParams writes the parameters as C strings one after another (key,
// value, key, value, ...): into the frame when they fit (nil is returned),
// else into a Go buffer C reads during the call.
func packParams(c *C.go_call, params []Param) *C.char {
	n := 0
	for _, p := range params {
		n += len(p.Key) + len(p.Value) + 2
	}
	if n <= C.GO_CALL_PARAMS {
		room := unsafe.Slice((*byte)(unsafe.Pointer(&c.params[0])), n)
		at := 0
		for _, p := range params {
			at += copy(room[at:], p.Key)
			room[at] = 0
			at += copy(room[at+1:], p.Value) + 1
			room[at] = 0
			at++
		}
		return nil
	}
	buf := make([]byte, 0, n)
	for _, p := range params {
		buf = append(append(append(append(buf, p.Key...), 0), p.Value...), 0)
	}
	return (*C.char)(unsafe.Pointer(&buf[0]))
}

// defaultRoom is the outputs asked for first; an operator that makes more
// says so, and the call is made again with room for all of them.
const defaultRoom = 4

// invoke runs op making new outputs, as many as it produces.
func (op *Op) invoke(inputs []*NDArray, params []Param) ([]*NDArray, error) {
	var results []*NDArray
	_, err := op.call(inputs, nil, params, &results)
	return results, err
}

// invokeFirst runs op and returns its first output; the others, if any,
// are released at once.
func (op *Op) invokeFirst(inputs []*NDArray, params []Param) (*NDArray, error) {
	var first *NDArray
	_, err := op.call(inputs, nil, params, &first)
	return first, err
}

// call makes the C call. With given nil it makes new outputs, as many as
// the operator produces, and wraps them into wrap (a *[]*NDArray: all, a
// **NDArray: the first, the others released); else it writes into the
// given arrays' handles, and an operator that makes more outputs fails.
func (op *Op) call(inputs []*NDArray, given []C.DeftNDArrayHandle, params []Param,
	wrap interface{}) ([]C.DeftNDArrayHandle, error) {
	f := frames.Get().(*frame)
	defer frames.Put(f)
	c := f.c
	in, err := inputHandles(c, inputs)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(inputs)
	packed := packParams(c, params)
	room := defaultRoom
	if given != nil {
		room = len(given)
	}
	for {
		var out *C.DeftNDArrayHandle // nil: the frame's
		var grown []C.DeftNDArrayHandle
		switch {
		case given != nil:
			grown = append([]C.DeftNDArrayHandle(nil), given...)
		case room > C.GO_CALL_INLINE:
			grown = make([]C.DeftNDArrayHandle, room)
		default:
			for i := 0; i < room; i++ {
				c.out[i] = nil
			}
		}
		if len(grown) > 0 {
			out = &grown[0]
		}
		c.nout = C.int(room)
		status := C.go_invoke(c, op.h, C.int(len(inputs)), in, out, C.int(len(params)), packed)
		switch {
		case status < 0:
			return nil, fail(&c.st)
		case status > 0 && given != nil:
			return nil, &Error{Kind: ErrValue, Message: fmt.Sprintf(
				"deft: %s makes %d outputs, %d given", op.name, int(c.nout), len(given))}
		case status > 0: // short of room: grow and go again (nothing was made)
			room = int(c.nout)
			continue
		}
		notePressure(int64(c.live))
		made := grown
		if made == nil {
			made = c.out[:c.nout]
		}
		made = made[:c.nout]
		wrapOutputs(made, wrap)
		return made, nil
	}
}

// inputHandles puts the inputs' handles into the frame, or (more than it
// holds) into a Go slice it returns the start of; nil means the frame's.
func inputHandles(c *C.go_call, inputs []*NDArray) (*C.DeftNDArrayHandle, error) {
	if len(inputs) > C.GO_CALL_INLINE {
		hs, err := handles(inputs)
		if err != nil {
			return nil, err
		}
		return &hs[0], nil
	}
	for i, a := range inputs {
		h, err := a.raw()
		if err != nil {
			return nil, fmt.Errorf("deft: input %d: %w", i, err)
		}
		c.in[i] = h
	}
	return nil, nil
}

// wrapOutputs wraps new outputs into wrap: a *[]*NDArray takes them all, a
// **NDArray the first (the others are released); nil none.
func wrapOutputs(made []C.DeftNDArrayHandle, wrap interface{}) {
	switch w := wrap.(type) {
	case *[]*NDArray:
		*w = make([]*NDArray, len(made))
		for i, h := range made {
			(*w)[i] = wrapArray(h)
		}
	case **NDArray:
		*w = wrapArray(made[0])
		for _, h := range made[1:] {
			C.go_free_array(h)
		}
	}
}
