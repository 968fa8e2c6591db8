package deft

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// ProfilerConfig sets profiler options (DeftProfilerSetConfig): keys
// profile_all, profile_imperative, profile_symbolic, profile_memory,
// profile_api, aggregate_stats, continuous_dump ("true"/"false") and filename.
func ProfilerConfig(options ...Param) error {
	keys := make([]string, len(options))
	vals := make([]string, len(options))
	for i, o := range options {
		keys[i], vals[i] = o.Key, o.Value
	}
	ckeys, freeKeys := cStrings(keys)
	defer freeKeys()
	cvals, freeVals := cStrings(vals)
	defer freeVals()
	var st C.go_status
	if C.go_profiler_config(&st, C.int(len(options)), &ckeys[0], &cvals[0]) != 0 {
		return fail(&st)
	}
	return nil
}

func profilerCall(call func(*C.go_status) C.int) error {
	var st C.go_status
	if call(&st) != 0 {
		return fail(&st)
	}
	return nil
}

// ProfilerStart starts recording.
func ProfilerStart() error {
	return profilerCall(func(st *C.go_status) C.int { return C.go_profiler_state(st, 1) })
}

// ProfilerStop stops recording.
func ProfilerStop() error {
	return profilerCall(func(st *C.go_status) C.int { return C.go_profiler_state(st, 0) })
}

// ProfilerPause pauses (true) or resumes (false) recording.
func ProfilerPause(paused bool) error {
	return profilerCall(func(st *C.go_status) C.int { return C.go_profiler_pause(st, boolInt(paused)) })
}

// ProfilerDump writes the events recorded since the last dump to the trace
// file (option filename); finished ends the file.
func ProfilerDump(finished bool) error {
	return profilerCall(func(st *C.go_status) C.int { return C.go_profiler_dump(st, boolInt(finished)) })
}

// ProfilerReset drops the recorded events and the statistics.
func ProfilerReset() error {
	return profilerCall(func(st *C.go_status) C.int { return C.go_profiler_reset(st) })
}

var dumpsMu sync.Mutex // the text C returns lives until the next call on any thread

// ProfilerStats returns the aggregate statistics per operator and domain, as
// a table or (json) as JSON; reset clears them after.
func ProfilerStats(json, reset bool) (string, error) {
	dumpsMu.Lock()
	defer dumpsMu.Unlock()
	var st C.go_status
	var text *C.char
	if C.go_profiler_dumps(&st, boolInt(reset), boolInt(json), &text) != 0 {
		return "", fail(&st)
	}
	return C.GoString(text), nil
}

// ProfileDomain is the category user objects appear under.
type ProfileDomain struct {
	handle
	h C.DeftProfileDomainHandle
}

// NewProfileDomain makes a domain.
func NewProfileDomain(name string) (*ProfileDomain, error) {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	var st C.go_status
	var h C.DeftProfileDomainHandle
	if C.go_profile_domain(&st, c, &h) != 0 {
		return nil, fail(&st)
	}
	d := &ProfileDomain{h: h}
	runtime.SetFinalizer(d, func(d *ProfileDomain) { d.Close() })
	return d, nil
}

// Close releases the domain (its objects stay valid).
func (d *ProfileDomain) Close() error {
	return d.release(d, func(st *C.go_status) C.int { return C.go_profile_domain_free(st, d.h) })
}

// use runs call with the domain's handle while it is open, keeping d reachable.
func (d *ProfileDomain) use(call func(C.DeftProfileDomainHandle) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return call(d.h)
}

// Marker records an instant marker; scope is "global", "process", "thread",
// "task" or "marker".
func (d *ProfileDomain) Marker(name, scope string) error {
	cname, cscope := C.CString(name), C.CString(scope)
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(cscope))
	return d.use(func(h C.DeftProfileDomainHandle) error {
		var st C.go_status
		if C.go_profile_marker(&st, h, cname, cscope) != 0 {
			return fail(&st)
		}
		return nil
	})
}

// ProfileKind is the kind of a user profiling object.
type ProfileKind int

const (
	ProfileTask    ProfileKind = 0 // a span that may start and stop on different threads
	ProfileFrame   ProfileKind = 1 // a span, one per iteration say
	ProfileEvent   ProfileKind = 2 // a span on the thread that starts and stops it
	ProfileCounter ProfileKind = 3 // a value over time
)

// ProfileObject is a task, frame, event or counter of a domain.
type ProfileObject struct {
	handle
	h C.DeftProfileObjectHandle
}

// NewObject makes a task, frame, event or counter in the domain.
func (d *ProfileDomain) NewObject(kind ProfileKind, name string) (*ProfileObject, error) {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	var h C.DeftProfileObjectHandle
	err := d.use(func(dh C.DeftProfileDomainHandle) error {
		var st C.go_status
		if C.go_profile_object(&st, dh, C.int(kind), c, &h) != 0 {
			return fail(&st)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	o := &ProfileObject{h: h}
	runtime.SetFinalizer(o, func(o *ProfileObject) { o.Close() })
	return o, nil
}

// Close releases the object.
func (o *ProfileObject) Close() error {
	return o.release(o, func(st *C.go_status) C.int { return C.go_profile_object_free(st, o.h) })
}

func (o *ProfileObject) do(call func(*C.go_status, C.DeftProfileObjectHandle) C.int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	var st C.go_status
	if call(&st, o.h) != 0 {
		return fail(&st)
	}
	return nil
}

// Start starts a task, frame or event.
func (o *ProfileObject) Start() error {
	return o.do(func(st *C.go_status, h C.DeftProfileObjectHandle) C.int { return C.go_profile_start(st, h) })
}

// Stop stops it: its span is recorded.
func (o *ProfileObject) Stop() error {
	return o.do(func(st *C.go_status, h C.DeftProfileObjectHandle) C.int { return C.go_profile_stop(st, h) })
}

// SetCounter sets a counter's value (add false) or changes it by value.
func (o *ProfileObject) SetCounter(value int64, add bool) error {
	return o.do(func(st *C.go_status, h C.DeftProfileObjectHandle) C.int {
		return C.go_profile_counter(st, h, C.int64_t(value), boolInt(add))
	})
}
