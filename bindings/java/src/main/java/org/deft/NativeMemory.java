package org.deft;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The bound on native memory held by dropped arrays. The Java heap sees an
 * NDArray as a few dozen bytes whatever native memory its handle holds, so
 * a loop that drops arrays without close() can fill memory long before the
 * JVM collects them and their Cleaner frees the handles. Every call that
 * creates arrays reports deft's live CPU bytes here (the JNI call returns
 * the counter). When they pass both the threshold and twice the least seen
 * since the last collection, the binding runs System.gc() and waits for
 * the Cleaner to free what the collection found. The second condition
 * keeps a program that really holds much native memory from being
 * collected over and over; and since it follows the least bytes seen, not
 * those left at the end of a collection, a Cleaner that lags behind one
 * collection does not raise the next one's trigger.
 */
final class NativeMemory {
    /** The threshold unless DEFT_JAVA_GC_BYTES or setThreshold says otherwise: 32 MiB. */
    static final long DEFAULT_THRESHOLD = 32L << 20;

    /** The threshold at start (DEFT_JAVA_GC_BYTES, else the default). */
    static final long INITIAL = parseThreshold(System.getenv("DEFT_JAVA_GC_BYTES"));

    private static volatile long threshold = INITIAL; // 0: off
    private static volatile long trigger = INITIAL > 0 ? INITIAL : Long.MAX_VALUE; // same, 0 as never
    private static volatile long low = Long.MAX_VALUE; // least live bytes seen since the last collection
    private static final AtomicLong runs = new AtomicLong();
    private static final ReentrantLock collecting = new ReentrantLock();

    private NativeMemory() {}

    /** A threshold from the environment: bytes >= 0; the default otherwise. */
    static long parseThreshold(String env) {
        if (env != null) {
            try {
                long v = Long.parseLong(env.trim());
                if (v >= 0) return v;
            } catch (NumberFormatException e) {
                // not a number: the default, as for a negative one
            }
        }
        return DEFAULT_THRESHOLD;
    }

    static long setThreshold(long bytes) {
        long prev = threshold;
        threshold = Math.max(bytes, 0);
        trigger = threshold > 0 ? threshold : Long.MAX_VALUE;
        return prev;
    }

    static long runs() {
        return runs.get();
    }

    /** Called with deft's live CPU bytes after a call that created arrays. */
    static void note(long live) {
        if (live < low) low = live; // racy but monotone enough: a bound, not a count
        if (live >= trigger && live / 2 >= low) collect();
    }

    /**
     * One collection at a time; callers that find one running go on (it
     * serves them too). The Cleaner frees on its own thread some time after
     * the collection (later still on a busy machine), and deft releases
     * storage once pending work on it is done: wait for live bytes to start
     * falling (at most 10 ms: there may be nothing to free), then while
     * they fall, until they did not for 1 ms (at most 50 ms in all).
     */
    private static void collect() {
        if (!collecting.tryLock()) return;
        try {
            long before = Jni.liveBytes(), live = before;
            System.gc();
            for (int i = 0, still = 0; i < 500 && still < 10; i++) {
                LockSupport.parkNanos(100_000);
                long now = Jni.liveBytes();
                boolean started = live < before || i >= 100;
                still = now < live || !started ? 0 : still + 1;
                live = Math.min(live, now);
            }
            low = live;
            runs.incrementAndGet();
        } finally {
            collecting.unlock();
        }
    }
}
