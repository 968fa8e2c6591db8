package deft

/*
#include "shim.h"
*/
import "C"

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The Go collector sees an NDArray as a few dozen bytes, whatever native
// memory its handle holds, so a loop that drops arrays without Close can
// fill memory long before Go collects. The binding reads deft's live CPU
// bytes after each call that creates arrays (the shim returns the counter)
// and, past a bound, runs a collection and waits for the finalizers to free
// what it found. It also counts the arrays wrapped and not yet released,
// and collects past a bound on that count (tiny arrays never reach the
// byte bound, but thousands of live handles slow deft down). Both bounds
// follow what stays live, so a program that holds much is not collected
// over and over.

// DefaultNativeGCThreshold is the bound used unless DEFT_GO_GC_BYTES or
// SetNativeGCThreshold says otherwise.
const DefaultNativeGCThreshold = 32 << 20

var (
	gcThreshold atomic.Int64 // 0: off
	curLow      atomic.Int64 // least live bytes seen since the last collection
	windowLow   atomic.Int64 // least live bytes over the intervals before (see window)
	gcRuns      atomic.Int64 // collections the bound triggered
	finalized   atomic.Int64 // arrays released by their finalizer
	gcMu        sync.Mutex
)

func init() {
	t := int64(DefaultNativeGCThreshold)
	if env := os.Getenv("DEFT_GO_GC_BYTES"); env != "" {
		if v, err := strconv.ParseInt(env, 10, 64); err == nil && v >= 0 {
			t = v
		}
	}
	SetNativeGCThreshold(t)
	handleTrigger.Store(maxDroppable)
}

// SetNativeGCThreshold sets the bound and returns the previous one: when
// deft's live CPU bytes pass max(bytes, twice the least seen over the last
// 8 intervals between such collections), the binding runs runtime.GC so
// that the finalizers of dropped arrays free their native memory. 0 turns
// the bound off (the count bound too). The environment variable
// DEFT_GO_GC_BYTES sets it at start (default 32 MiB).
func SetNativeGCThreshold(bytes int64) (prev int64) {
	if bytes < 0 {
		bytes = 0
	}
	return gcThreshold.Swap(bytes)
}

// Each live handle costs deft some bookkeeping (a registry of live handles,
// the engine's variables), and many thousands of dropped arrays of a few
// bytes each never reach the byte bound: past maxDroppable arrays wrapped
// and not closed, the bound runs a collection too (see liveHandles).
const maxDroppable = 16384

var (
	liveHandles   atomic.Int64 // arrays wrapped and not yet closed or finalized
	handleTrigger atomic.Int64 // live handles that trigger the next collection
)

// noteHandle counts an array wrapped (+1) or released (-1).
func noteHandle(delta int64) {
	n := liveHandles.Add(delta)
	if delta > 0 && gcThreshold.Load() > 0 && n >= handleTrigger.Load() {
		collectNative(false) // a count, not memory: no need to wait for the frees
	}
}

// NativeGCRuns is the number of collections the bound has run.
func NativeGCRuns() int64 { return gcRuns.Load() }

// notePressure is called with the live bytes a call left behind. The
// trigger is twice the least live count seen over the last
// triggerWindow intervals between collections (at least the threshold).
// Finalizers that lag behind a loop for a few collections leave it where
// the loop's garbage was gone, so the loop collects again and waits for
// them; a program that really holds much native memory moves it up after
// triggerWindow collections, and is not collected over and over.
func notePressure(live int64) {
	t := gcThreshold.Load()
	if t <= 0 {
		return
	}
	for {
		low := curLow.Load()
		if live >= low || curLow.CompareAndSwap(low, live) {
			break
		}
	}
	low := curLow.Load()
	if w := windowLow.Load(); w < low {
		low = w
	}
	if live >= 2*low && live >= t {
		collectNative(true)
	}
}

// triggerWindow is how many intervals between collections the triggers
// look back over.
const triggerWindow = 8

var window struct { // under gcMu
	bytes, handles [triggerWindow]int64 // least live in each interval, handles at each collection
	next           int
}

// collectNative runs one collection at a time; callers that find one
// running go on (the running one serves them too). wait: give the
// finalizers time to free what it found (for the byte bound).
func collectNative(wait bool) {
	if !gcMu.TryLock() {
		return
	}
	defer gcMu.Unlock()
	runtime.GC()
	// The finalizers of what the collection found run on their own
	// goroutine, and deft releases storage after pending work on it: wait
	// while either goes on, until neither did for 1 ms (at most 20 ms).
	seen, live := finalized.Load(), liveCPUBytes()
	for i, still := 0, 0; wait && i < 200 && still < 10; i++ {
		time.Sleep(100 * time.Microsecond)
		nowSeen, nowLive := finalized.Load(), liveCPUBytes()
		if nowSeen == seen && nowLive >= live {
			still++
		} else {
			still = 0
		}
		if nowLive < live {
			live = nowLive
		}
		seen = nowSeen
	}
	gcRuns.Add(1)
	// the interval that ends: its least live bytes; the next starts at live
	window.bytes[window.next] = curLow.Load()
	window.handles[window.next] = liveHandles.Load()
	window.next = (window.next + 1) % triggerWindow
	curLow.Store(live)
	low, handles := window.bytes[0], window.handles[0]
	for k := 1; k < triggerWindow; k++ {
		if window.bytes[k] < low {
			low = window.bytes[k]
		}
		if window.handles[k] < handles {
			handles = window.handles[k]
		}
	}
	windowLow.Store(low)
	// the arrays dropped and not finalized, likewise, at least maxDroppable
	if handles *= 2; handles < maxDroppable {
		handles = maxDroppable
	}
	handleTrigger.Store(handles)
}

func liveCPUBytes() int64 {
	flushDropped()
	var st C.go_status
	var v C.int64_t
	if C.go_memory_stat(&st, 1, 0, 0, &v) != 0 {
		fail(&st)
		return 0
	}
	return int64(v)
}

// MemoryStat reads one of deft's memory counters of a device.
type MemoryStat int

const (
	MemLiveBytes    MemoryStat = 0 // bytes of array storage in use
	MemLiveBuffers  MemoryStat = 1 // storage buffers in use
	MemPeakBytes    MemoryStat = 2 // the most MemLiveBytes has been
	MemCachedBytes  MemoryStat = 3 // bytes the pool holds, free, for reuse
	MemSystemAllocs MemoryStat = 4 // calls the pool made to the system allocator
)

// ReadMemoryStat returns a memory counter of dev (DeftGetMemoryStat).
func ReadMemoryStat(dev Device, stat MemoryStat) (int64, error) {
	flushDropped()
	var st C.go_status
	var v C.int64_t
	if C.go_memory_stat(&st, C.int(dev.Type), C.int(dev.ID), C.int(stat), &v) != 0 {
		return 0, fail(&st)
	}
	return int64(v), nil
}

// liveArrayHandles is deft's count of live NDArray handles, read without
// first freeing what finalizers queued (for the test of the batch's timer).
func liveArrayHandles() int64 {
	var st C.go_status
	var a, b C.int64_t
	if C.go_counters(&st, &a, &b) != 0 {
		fail(&st)
		return -1
	}
	return int64(a)
}
