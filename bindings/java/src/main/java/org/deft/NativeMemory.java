package org.deft;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The bound on native memory held by dropped arrays. The Java heap sees an
 * NDArray as a few dozen bytes whatever native memory its handle holds, so
 * a loop that drops arrays without close() can fill memory long before the
 * JVM collects them and their Cleaner frees the handles. Every call that
 * creates arrays reports deft's live CPU bytes here (the JNI call returns
 * the counter); past the trigger, the binding runs System.gc() and waits
 * for the Cleaner to free what the collection found. The trigger is max(threshold, twice
 * the live bytes left after the last such collection), so a program that
 * really holds much native memory is not collected over and over.
 */
final class NativeMemory {
    /** The threshold unless DEFT_JAVA_GC_BYTES or setThreshold says otherwise: 32 MiB. */
    static final long DEFAULT_THRESHOLD = 32L << 20;

    /** The threshold at start (DEFT_JAVA_GC_BYTES, else the default). */
    static final long INITIAL = parseThreshold(System.getenv("DEFT_JAVA_GC_BYTES"));

    private static volatile long threshold = INITIAL; // 0: off
    private static volatile long trigger = threshold > 0 ? threshold : Long.MAX_VALUE;
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

    static long threshold() {
        return threshold;
    }

    static long runs() {
        return runs.get();
    }

    /** Called with deft's live CPU bytes after a call that created arrays. */
    static void note(long live) {
        if (live >= trigger) collect();
    }

    /**
     * One collection at a time; callers that find one running go on (it
     * serves them too). The Cleaner frees on its own thread after the
     * collection, and deft releases storage once pending work on it is
     * done: wait while live bytes fall, until they did not for 1 ms (at
     * most 50 ms).
     */
    private static void collect() {
        if (!collecting.tryLock()) return;
        try {
            System.gc();
            long live = Jni.liveBytes();
            for (int i = 0, still = 0; i < 500 && still < 10; i++) {
                sleepBriefly();
                long now = Jni.liveBytes();
                still = now < live ? 0 : still + 1;
                live = Math.min(live, now);
            }
            runs.incrementAndGet();
            long t = threshold;
            trigger = t > 0 ? Math.max(t, 2 * live) : Long.MAX_VALUE;
        } finally {
            collecting.unlock();
        }
    }

    private static void sleepBriefly() {
        java.util.concurrent.locks.LockSupport.parkNanos(100_000);
    }
}
