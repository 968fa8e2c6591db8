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

// packParams writes the parameters as C strings one after another (key,
// value, key, value, ...), in one Go buffer C reads during the call.
func packParams(params []Param) *C.char {
	if len(params) == 0 {
		return nil
	}
	n := 0
	for _, p := range params {
		n += len(p.Key) + len(p.Value) + 2
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
	out := make([]C.DeftNDArrayHandle, defaultRoom)
	out, err := op.call(inputs, out, params, true)
	if err != nil {
		return nil, err
	}
	results := make([]*NDArray, len(out))
	for i := range results {
		results[i] = wrapArray(out[i])
	}
	return results, nil
}

// call makes the C call: nil entries of out receive new arrays. When the
// operator makes more outputs than out has room for, out grows (if grow) or
// the call fails. It returns the outputs' handles.
func (op *Op) call(inputs []*NDArray, out []C.DeftNDArrayHandle, params []Param,
	grow bool) ([]C.DeftNDArrayHandle, error) {
	in, err := handles(inputs)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(inputs)
	packed := packParams(params)
	for {
		var st C.go_status
		var live C.int64_t
		nout := C.int(len(out))
		var first *C.DeftNDArrayHandle
		if len(out) > 0 {
			first = &out[0]
		}
		status := C.go_invoke(&st, op.h, C.int(len(inputs)), &in[0], &nout, first,
			C.int(len(params)), packed, &live)
		switch {
		case status < 0:
			return nil, fail(&st)
		case status > 0 && !grow:
			return nil, &Error{Kind: ErrValue, Message: fmt.Sprintf(
				"deft: %s makes %d outputs, %d given", op.name, int(nout), len(out))}
		case status > 0: // short of room: grow and go again (nothing was made)
			out = append(out, make([]C.DeftNDArrayHandle, int(nout)-len(out))...)
		default:
			notePressure(int64(live))
			return out[:nout], nil
		}
	}
}
