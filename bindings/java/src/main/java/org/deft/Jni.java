package org.deft;

/**
 * The hand-written natives of the hot path (bindings/java/jni_calls.c):
 * handles cross as longs, so an operator call makes no proxy objects. The
 * callers keep the owning NDArray objects reachable while a call runs.
 */
final class Jni {
    static {
        NativeLoader.load();
    }

    private Jni() {}

    /** The operator named name (a registry entry, never freed); DeftException if unknown. */
    static native long op(String name);

    /**
     * DeftImperativeInvoke: out[0 .. out.length - 1) are the output handles
     * (0: create one), its last element receives deft's live CPU bytes
     * after the call; params alternate keys and values. Returns the outputs
     * made, written into out, or -needed when the operator makes more than
     * the room (nothing was created: call again with that room).
     */
    static native int invoke(long op, long[] in, long[] out, String[] params);

    /** DeftNDArrayFree. */
    static native void free(long handle);

    /** deft's live CPU bytes (DEFT_MEM_LIVE_BYTES). */
    static native long liveBytes();
}
