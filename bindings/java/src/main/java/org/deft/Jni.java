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
     * DeftImperativeInvoke: slots holds nin input handles, then the output
     * room (0: create one), then one element that receives deft's live CPU
     * bytes after the call; params holds the nwords strings of
     * {@link #params} (keys and values alternately). Returns the outputs
     * made, written into their slots, or -needed when the operator makes
     * more than the room (nothing was created: call again with that room).
     */
    static native int invoke(long op, long[] slots, int nin, byte[] params, int nwords);

    /**
     * Parameter strings for invoke, each UTF-8 and NUL-terminated, one after
     * another: made in Java, they cross into C as one array (a JNI call per
     * string would cost more than the operator call).
     */
    static byte[] params(String[] words) {
        int n = 0;
        for (String w : words) {
            if (w == null) throw new NullPointerException("a parameter key or value is null");
            n += w.length() + 1;
        }
        byte[] out = new byte[n];
        int at = 0;
        for (String w : words) {
            for (int i = 0; i < w.length(); i++) {
                char c = w.charAt(i);
                if (c == 0 || c >= 0x80) return utf8(words);
                out[at++] = (byte) c;
            }
            out[at++] = 0;
        }
        return out;
    }

    /** params() for strings beyond ASCII (a NUL inside one stays an error in C). */
    private static byte[] utf8(String[] words) {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        for (String w : words) {
            out.writeBytes(w.getBytes(java.nio.charset.StandardCharsets.UTF_8));
            out.write(0);
        }
        return out.toByteArray();
    }

    /** DeftNDArrayFree. */
    static native void free(long handle);

    /** deft's live CPU bytes (DEFT_MEM_LIVE_BYTES). */
    static native long liveBytes();
}
