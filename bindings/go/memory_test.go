package deft

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// pressureLoop adds 1 to an array of size floats n times, dropping each
// result without Close: only finalizers free them.
func pressureLoop(n, size int) error {
	x, err := FromFloat32(make([]float32, size), int64(size))
	if err != nil {
		return err
	}
	defer x.Close()
	for i := 0; i < n; i++ {
		if _, err := x.Call("_plus_scalar", nil, Param{"scalar", "1"}); err != nil {
			return err
		}
	}
	return WaitAll()
}

// TestPressureChild is the loop in a process of its own (the peak counter
// is process-wide): it runs only when TestNativePeak starts it.
func TestPressureChild(t *testing.T) {
	var n, size int
	if _, err := fmt.Sscanf(os.Getenv("DEFT_GO_PRESSURE"), "%d,%d", &n, &size); err != nil {
		t.Skip("run by TestNativePeak")
	}
	if err := pressureLoop(n, size); err != nil {
		t.Fatal(err)
	}
	peak, err := ReadMemoryStat(CPU, MemPeakBytes)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("native peak %d bytes, %d collections\n", peak, NativeGCRuns())
}

// childPeak runs the loop in a child process with env added.
func childPeak(t *testing.T, loops, size int, env ...string) (peak, runs int64) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPressureChild$", "-test.v")
	cmd.Env = append(append(os.Environ(), fmt.Sprintf("DEFT_GO_PRESSURE=%d,%d", loops, size)),
		env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range splitLines(string(out)) {
		if _, err := fmt.Sscanf(line, "native peak %d bytes, %d collections", &peak, &runs); err == nil {
			return peak, runs
		}
	}
	t.Fatalf("child printed no peak:\n%s", out)
	return 0, 0
}

func splitLines(s string) []string {
	var lines []string
	start := 0
	for i, c := range s {
		if c == '\n' {
			lines = append(lines, s[start:i])
			start = i + 1
		}
	}
	return append(lines, s[start:])
}

// Dropped arrays without Close: with the bound (the default, 32 MiB) deft's
// native peak stays under 64 MiB; with it off, 150 arrays of 1 MiB pass 64
// MiB (the Go heap alone would not trigger a collection for thousands
// more). Calls on 16 KiB run on the calling thread (input and output are
// under the engine's 64 KiB inline size, so no queued work holds them and
// the peak does not depend on how fast a worker keeps up); those on 1 MiB on the
// engine's threads, and the bytes of work queued there are bounded by
// DEFT_ENGINE_MAX_PENDING_BYTES (default 1 GiB), not by the collector (a
// collection cannot free what queued work still needs): that case sets
// the engine's bound to 16 MiB too.
func TestNativePeak(t *testing.T) {
	const limit = 64 << 20
	cases := []struct {
		name        string
		loops, size int
		env         []string
		bounded     bool
	}{
		{"1000 x 1 MiB, engine queue 16 MiB", 1000, 1 << 18,
			[]string{"DEFT_ENGINE_MAX_PENDING_BYTES=16777216"}, true},
		{"8000 x 16 KiB", 8000, 1 << 12, nil, true},
		{"150 x 1 MiB, bound off", 150, 1 << 18, []string{"DEFT_GO_GC_BYTES=0"}, false},
	}
	for _, c := range cases {
		peak, runs := childPeak(t, c.loops, c.size, c.env...)
		t.Logf("%s: native peak %.1f MiB, %d collections", c.name, float64(peak)/(1<<20), runs)
		if c.bounded && (peak >= limit || runs == 0) {
			t.Errorf("%s: peak %d bytes, want < %d", c.name, peak, limit)
		}
		if !c.bounded && (peak < limit || runs != 0) {
			t.Errorf("%s: peak %d bytes, %d collections: the loop does not test the bound",
				c.name, peak, runs)
		}
	}
}

// A program that really holds more than the threshold is not collected
// over and over: the trigger follows what stays live (while it grows, up to
// triggerWindow collections each time it doubles).
func TestBoundFollowsWhatStaysLive(t *testing.T) {
	settle(t) // other tests' dropped arrays finalized: the collections count this test's
	start := NativeGCRuns()
	var held []*NDArray
	for i := 0; i < 48; i++ { // 48 MiB, over the default 32 MiB
		held = append(held, must(Zeros(Float32, 1<<18)))
	}
	x := must(FromFloat32([]float32{1}, 1))
	before := NativeGCRuns()
	t.Logf("%d collections while 48 MiB were made", before-start)
	for i := 0; i < 2000; i++ {
		must(0, must(x.Call("_plus_scalar", nil, Param{"scalar", "1"})).Close())
	}
	if runs := NativeGCRuns() - before; runs > 2 {
		t.Fatalf("%d collections for 2000 calls with 48 MiB held", runs)
	}
	for _, a := range held {
		a.Close()
	}
	x.Close()
}

// Tiny arrays never reach the byte bound; the count of arrays dropped and
// not yet finalized is bounded too (deft's bookkeeping grows with it).
func TestBoundCountsDroppedArrays(t *testing.T) {
	x := must(FromFloat32([]float32{1}, 1))
	defer x.Close()
	before, most := NativeGCRuns(), int64(0)
	for i := 0; i < 100000; i++ {
		must(x.Call("_plus_scalar", nil, Param{"scalar", "1"}))
		if n := liveHandles.Load(); n > most {
			most = n
		}
	}
	runs := NativeGCRuns() - before
	t.Logf("100000 dropped 1-element arrays: at most %d live, %d collections", most, runs)
	if runs < 2 || most > 3*maxDroppable {
		t.Fatalf("at most %d live arrays, %d collections", most, runs)
	}
}

// Finalizers free in batches; a batch that does not fill is freed by a
// timer within about a millisecond, with no call that counts arrays.
func TestPartialFreeBatchGoesByItself(t *testing.T) {
	settle(t)
	base := liveArrayHandles()
	func() {
		for i := 0; i < 3; i++ {
			must(Zeros(Float32, 2))
		}
	}()
	for i := 0; i < 1000 && liveArrayHandles() != base; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := liveArrayHandles(); n != base {
		t.Fatalf("live handles %d, want %d: the partial batch was never freed", n, base)
	}
}
