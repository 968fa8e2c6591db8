// Per-call cost of x + 1 on a 1-element float32 array from Go, against the
// same call made from C in the same process and run (a C loop in this
// file's preamble, one cgo crossing for all its calls).
//
//	cd bench/go && PKG_CONFIG_PATH=$PWD/../../build/pkgconfig go run .
//
// Each variant reports wall time and the process's CPU time (getrusage: all
// threads, so the collector's and the finalizers' work counts; less moved
// by other processes' load than wall time) per call. Go is timed three ways: the generated function with Close on each result;
// the same dropped without Close, the time including the collections and
// finalizers that free them (the loop's end waits until the live array count
// is back where it started); and Invoke with a Param. Rounds alternate; min
// and median per call are printed, with the load average.
package main

/*
#cgo pkg-config: deft
#include <deft/c_api.h>
#include <time.h>

#include "../plus_scalar_loop.c"

// n calls of _plus_scalar on x, each result freed at once: ns per call.
static double c_plus_scalar(DeftNDArrayHandle x, int n) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (deft_bench_plus_scalar_calls(x, n)) return -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
}

static int c_make(DeftNDArrayHandle *x) {
    const int64_t shape[1] = {1};
    const float one = 1;
    return DeftNDArrayCreateFromData(shape, 1, DEFT_FLOAT32, DEFT_CPU, 0, &one, sizeof one, x);
}
*/
import "C"

import (
	"fmt"
	"log"
	"os"
	"runtime"
	"sort"
	"syscall"
	"time"

	"deft.dev/deft"
)

const calls, rounds = 200000, 7

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func perCall(start time.Time) float64 {
	return float64(time.Since(start).Nanoseconds()) / calls
}

func goClosed(x *deft.NDArray) float64 {
	opts := &deft.InternalPlusScalarOpts{Scalar: deft.Ptr(1.0)}
	start := time.Now()
	for i := 0; i < calls; i++ {
		y, err := deft.InternalPlusScalar(x, opts)
		check(err)
		check(y.Close())
	}
	check(deft.WaitAll())
	return perCall(start)
}

// goDropped leaves every result to its finalizer and counts the time until
// all of them have run.
func goDropped(x *deft.NDArray) float64 {
	before, _, err := deft.Counters()
	check(err)
	opts := &deft.InternalPlusScalarOpts{Scalar: deft.Ptr(1.0)}
	start := time.Now()
	for i := 0; i < calls; i++ {
		_, err := deft.InternalPlusScalar(x, opts)
		check(err)
	}
	for {
		runtime.GC()
		live, _, err := deft.Counters()
		check(err)
		if live <= before {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return perCall(start)
}

func goInvoke(x *deft.NDArray) float64 {
	in := []*deft.NDArray{x}
	start := time.Now()
	for i := 0; i < calls; i++ {
		outs, err := deft.Invoke("_plus_scalar", in, deft.Param{Key: "scalar", Value: "1"})
		check(err)
		check(outs[0].Close())
	}
	check(deft.WaitAll())
	return perCall(start)
}

// cpuNow is the process's user + system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadAverage() string {
	text, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(text) < 4 {
		return "unknown"
	}
	return string(text[:4])
}

func summary(v []float64) (min, median float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[0], s[len(s)/2]
}

func main() {
	var cx C.DeftNDArrayHandle
	if C.c_make(&cx) != 0 {
		log.Fatal("creating the C array failed")
	}
	x, err := deft.FromFloat32([]float32{1}, 1)
	check(err)
	names := []string{"C", "Go, Close each", "Go, dropped (finalizers)", "Go, Invoke + Param"}
	runs := []func() float64{
		func() float64 { return float64(C.c_plus_scalar(cx, calls)) },
		func() float64 { return goClosed(x) },
		func() float64 { return goDropped(x) },
		func() float64 { return goInvoke(x) },
	}
	times := make([][]float64, len(runs))
	cpu := make([][]float64, len(runs))
	for r := 0; r < rounds; r++ { // alternate: each round runs every variant once
		for i, run := range runs {
			c0 := cpuNow()
			times[i] = append(times[i], run())
			cpu[i] = append(cpu[i], float64((cpuNow()-c0).Nanoseconds())/calls)
		}
	}
	fmt.Printf("x + 1 on a 1-element float32 array, %d calls x %d rounds, load average %s\n",
		calls, rounds, loadAverage())
	_, cMed := summary(times[0])
	_, cCPU := summary(cpu[0])
	fmt.Printf("  %-26s %18s %18s %24s\n", "", "wall min/median", "CPU min/median", "median vs C (wall, CPU)")
	for i, name := range names {
		lo, med := summary(times[i])
		clo, cmed := summary(cpu[i])
		fmt.Printf("  %-26s %7.0f /%7.0f ns %7.0f /%7.0f ns %10.1fx %10.1fx\n",
			name, lo, med, clo, cmed, med/cMed, cmed/cCPU)
	}
}
