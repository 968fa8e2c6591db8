package org.deft;

import org.deft.internal.DeftNative;
import org.deft.internal.DeftProfileDomain;
import org.deft.internal.DeftProfileObject;

/**
 * The profiler: a Chrome trace of operator runs, engine waits, memory events and user
 * objects, and aggregate statistics per operator (deft/profiler.h). It is process-wide.
 */
public final class Profiler {
    static {
        Deft.load();
    }

    private Profiler() {}

    /**
     * Set options, alternating key and value: profile_all, profile_imperative,
     * profile_symbolic, profile_memory, profile_api, aggregate_stats, continuous_dump
     * ("true"/"false") and filename. Options not given keep their values.
     *
     * @param options keys and values
     * @throws DeftException on an unknown key or a value that does not parse (nothing changes)
     */
    public static void config(String... options) {
        if (options.length % 2 != 0)
            throw new IllegalArgumentException("options must alternate key and value");
        String[] keys = new String[options.length / 2], vals = new String[options.length / 2];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = options[2 * i];
            vals[i] = options[2 * i + 1];
        }
        DeftNative.DeftProfilerSetConfig(keys.length, keys, vals);
    }

    /** Start recording. */
    public static void start() {
        DeftNative.DeftProfilerSetState(1);
    }

    /** Stop recording. */
    public static void stop() {
        DeftNative.DeftProfilerSetState(0);
    }

    /** @param paused true to pause recording, false to resume it */
    public static void pause(boolean paused) {
        DeftNative.DeftProfilerPause(paused ? 1 : 0);
    }

    /**
     * Write the events recorded since the last dump to the trace file (option filename).
     *
     * @param finished true to end the file: the next dump starts a new one
     * @throws DeftException naming the file when it cannot be written
     */
    public static void dump(boolean finished) {
        DeftNative.DeftProfilerDump(finished ? 1 : 0);
    }

    /**
     * The aggregate statistics: count, total, min, max and mean time per operator and
     * domain, in microseconds.
     *
     * @param json true for JSON, false for a text table
     * @param reset true to clear the statistics after reading them
     * @return the statistics
     */
    public static String stats(boolean json, boolean reset) {
        synchronized (Profiler.class) { // the text lives until the next call on any thread
            String[] out = new String[1];
            DeftNative.DeftProfilerDumps(reset ? 1 : 0, json ? 1 : 0, out);
            return out[0];
        }
    }

    /** Drop the recorded events and the statistics. */
    public static void reset() {
        DeftNative.DeftProfilerReset();
    }

    /** The kinds of user object. */
    public enum Kind {
        /** A span that may start and stop on different threads. */
        TASK,
        /** A span, one per iteration say. */
        FRAME,
        /** A span on the thread that starts and stops it. */
        EVENT,
        /** A value over time. */
        COUNTER
    }

    /** A category user objects and markers appear under. */
    public static final class Domain extends Owned<DeftProfileDomain> {
        /**
         * @param name the domain's name
         */
        public Domain(String name) {
            this(create(name));
        }

        private Domain(DeftProfileDomain handle) {
            super(handle, handle::delete);
        }

        private static DeftProfileDomain create(String name) {
            DeftProfileDomain[] out = new DeftProfileDomain[1];
            DeftNative.DeftProfileCreateDomain(name, out);
            return out[0];
        }

        /**
         * @param kind task, frame, event or counter
         * @param name the object's name
         * @return a new object of this domain (it stays valid when the domain is closed)
         */
        public UserObject object(Kind kind, String name) {
            DeftProfileObject[] out = new DeftProfileObject[1];
            DeftNative.DeftProfileCreateObject(get(), kind.ordinal(), name, out);
            return new UserObject(out[0]);
        }

        /**
         * Record an instant marker.
         *
         * @param name the marker's name
         * @param scope "global", "process" or "thread"
         * @throws DeftException (VALUE) on an unknown scope
         */
        public void marker(String name, String scope) {
            DeftNative.DeftProfileSetMarker(get(), name, scope);
        }
    }

    /** A task, frame, event or counter of a domain. */
    public static final class UserObject extends Owned<DeftProfileObject> {
        private UserObject(DeftProfileObject handle) {
            super(handle, handle::delete);
        }

        /** Start a task, frame or event; a DeftException for a counter or one started. */
        public void start() {
            DeftNative.DeftProfileDurationStart(get());
        }

        /** Stop it: its span is recorded; a DeftException for a counter or one not started. */
        public void stop() {
            DeftNative.DeftProfileDurationStop(get());
        }

        /**
         * Set or change a counter's value; a DeftException for an object that is not one.
         *
         * @param value the new value, or the change
         * @param add true to add value to the counter, false to set it
         */
        public void counter(long value, boolean add) {
            DeftNative.DeftProfileSetCounter(get(), value, add ? 1 : 0);
        }
    }
}
