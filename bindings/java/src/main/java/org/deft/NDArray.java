package org.deft;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.deft.internal.DeftNative;

/**
 * An n-dimensional array on the CPU, computed asynchronously. close() frees
 * its handle at once (use try-with-resources); a Cleaner frees it when the
 * object becomes unreachable otherwise (and the binding collects when
 * native memory grows: see {@link Deft#setNativeGCThreshold}). Methods
 * called after close() throw IllegalStateException and never reach freed
 * memory.
 *
 * <p>Every method that hands the handle to C keeps this object reachable
 * until C is done with it (Reference.reachabilityFence, or a borrowed SWIG
 * view that holds this object), so the Cleaner cannot free an array that a
 * native call is reading, even when that call is the array's last use.
 */
public final class NDArray implements AutoCloseable {
    static {
        NativeLoader.load();
    }

    private static final Cleaner CLEANER = Cleaner.create();

    /** The handle, freed once: by close() or by the Cleaner's thread. */
    private static final class Handle implements Runnable {
        volatile long ptr;
        final boolean owned;

        Handle(long ptr, boolean owned) {
            this.ptr = ptr;
            this.owned = owned;
        }

        @Override
        public void run() { // once at most (Cleanable.clean)
            long p = ptr;
            ptr = 0;
            if (p != 0 && owned) Jni.free(p);
        }
    }

    private final Handle handle;
    private final Cleaner.Cleanable cleanable; // null for a borrowed array

    private NDArray(Handle h) {
        handle = h;
        cleanable = h.owned ? CLEANER.register(this, h) : null;
    }

    /** An array owning handle ptr (freed by close() or the Cleaner). */
    static NDArray owning(long ptr) {
        return new NDArray(new Handle(ptr, true));
    }

    /**
     * An array taking over the handle of a SWIG object, or borrowing it if
     * that object does not own it (custom operators' arrays: close() then
     * only forgets the handle).
     */
    NDArray(org.deft.internal.DeftNDArray h) {
        this(adopt(h));
    }

    private static Handle adopt(org.deft.internal.DeftNDArray h) {
        synchronized (h) { // swigOwns and swigRelease lock h too: one step
            boolean owns = h.swigOwns();
            return new Handle(owns ? h.swigRelease() : h.swigPointer(), owns);
        }
    }

    /** The handle; IllegalStateException after close(). Keep this reachable while C uses it. */
    long ptr() {
        long p = handle.ptr;
        if (p == 0) throw new IllegalStateException("the NDArray was closed");
        return p;
    }

    /**
     * A SWIG view of the handle for the generated calls: it holds this
     * array, so this stays reachable while a call that was given it runs.
     */
    org.deft.internal.DeftNDArray handle() {
        return new org.deft.internal.DeftNDArray(ptr(), this);
    }

    static org.deft.internal.DeftNDArray[] raw(NDArray[] arrays) {
        if (arrays == null) return null;
        org.deft.internal.DeftNDArray[] out = new org.deft.internal.DeftNDArray[arrays.length];
        for (int i = 0; i < arrays.length; i++) out[i] = arrays[i] == null ? null : arrays[i].handle();
        return out;
    }

    /**
     * The handles of arrays (0 for null), then extra zeros (the call's other
     * slots); the caller keeps arrays reachable while C uses the handles.
     */
    static long[] pointers(NDArray[] arrays, int extra) {
        long[] out = new long[arrays.length + extra];
        for (int i = 0; i < arrays.length; i++) out[i] = arrays[i] == null ? 0 : arrays[i].ptr();
        return out;
    }

    /** Free the handle now; a second close() does nothing. */
    @Override
    public void close() {
        if (cleanable != null) cleanable.clean();
        else handle.ptr = 0;
    }

    private static ByteBuffer buffer(long bytes) {
        return ByteBuffer.allocateDirect((int) bytes).order(ByteOrder.nativeOrder());
    }

    /** A float32 array holding a copy of data, in row-major order. */
    public static NDArray of(float[] data, long... shape) {
        ByteBuffer b = buffer(4L * data.length);
        b.asFloatBuffer().put(data);
        return create(b, 0, shape);
    }

    /** A float64 array holding a copy of data, in row-major order. */
    public static NDArray of(double[] data, long... shape) {
        ByteBuffer b = buffer(8L * data.length);
        b.asDoubleBuffer().put(data);
        return create(b, 1, shape);
    }

    private static NDArray create(ByteBuffer data, int dtype, long[] shape) {
        org.deft.internal.DeftNDArray[] out = new org.deft.internal.DeftNDArray[1];
        DeftNative.DeftNDArrayCreateFromData(shape, shape.length, dtype, 1, 0, data, out);
        NDArray array = new NDArray(out[0]);
        NativeMemory.note(Jni.liveBytes());
        return array;
    }

    public long[] shape() {
        long[] dims = new long[8];
        int[] ndim = new int[1];
        DeftNative.DeftNDArrayGetShape(handle(), dims, ndim);
        return java.util.Arrays.copyOf(dims, ndim[0]);
    }

    /** deft's dtype codes (DeftDType) by name, for messages: index = code. */
    private static final String[] DTYPE_NAMES = {"float32", "float64", "float16", "uint8", "int32",
        "int8", "int64", "bool", null, null, null, null, "bfloat16"};

    /** The array's dtype, as deft names it ("float32", "int64", ...). */
    public String dtype() {
        int[] code = new int[1];
        DeftNative.DeftNDArrayGetDType(handle(), code);
        String name = code[0] >= 0 && code[0] < DTYPE_NAMES.length ? DTYPE_NAMES[code[0]] : null;
        return name != null ? name : "dtype " + code[0];
    }

    /** The array's bytes, after checking that its dtype is `want` (a reader's). */
    private ByteBuffer read(String want, String reader) {
        try {
            String have = dtype();
            if (!have.equals(want))
                throw new DeftException(DeftException.Kind.TYPE.ordinal(),
                                        "the array is " + have + ", not " + want + ": " + reader
                                            + " reads " + want + " arrays (cast it with Cast first)");
            org.deft.internal.DeftNDArray h = handle();
            long[] nbytes = new long[1];
            DeftNative.DeftNDArrayGetNBytes(h, nbytes);
            ByteBuffer b = buffer(nbytes[0]);
            DeftNative.DeftNDArrayCopyToHost(h, b);
            return b;
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** The values of a float32 array (waiting for pending work); a TYPE DeftException otherwise. */
    public float[] toFloatArray() {
        ByteBuffer b = read("float32", "toFloatArray");
        float[] out = new float[b.capacity() / 4];
        b.asFloatBuffer().get(out);
        return out;
    }

    /** The values of a float64 array (waiting for pending work); a TYPE DeftException otherwise. */
    public double[] toDoubleArray() {
        ByteBuffer b = read("float64", "toDoubleArray");
        double[] out = new double[b.capacity() / 8];
        b.asDoubleBuffer().get(out);
        return out;
    }

    /** The values of an int32 array (waiting for pending work); a TYPE DeftException otherwise. */
    public int[] toIntArray() {
        ByteBuffer b = read("int32", "toIntArray");
        int[] out = new int[b.capacity() / 4];
        b.asIntBuffer().get(out);
        return out;
    }

    /** The values of an int64 array (waiting for pending work); a TYPE DeftException otherwise. */
    public long[] toLongArray() {
        ByteBuffer b = read("int64", "toLongArray");
        long[] out = new long[b.capacity() / 8];
        b.asLongBuffer().get(out);
        return out;
    }

    /** The bytes of a uint8 array (waiting for pending work); a TYPE DeftException otherwise. */
    public byte[] toByteArray() {
        ByteBuffer b = read("uint8", "toByteArray");
        byte[] out = new byte[b.capacity()];
        b.get(out);
        return out;
    }

    /** Whether the array waits for deferred compute. */
    public boolean isLazy() {
        int[] status = new int[1];
        DeftNative.DeftNDArrayGetIsDeferredCompute(raw(new NDArray[] {this}), 1, status);
        return status[0] != 0;
    }

    /** Run operator name with this array as its first input; its first output. */
    public NDArray call(String name, NDArray[] others, String... params) {
        NDArray[] inputs = new NDArray[others.length + 1];
        inputs[0] = this;
        System.arraycopy(others, 0, inputs, 1, others.length);
        NDArray[] out = Deft.invoke(name, inputs, params);
        if (out.length == 0)
            throw new DeftException(DeftException.Kind.VALUE.ordinal(),
                                    "operator " + name + " made no output for call() to return");
        return out[0];
    }

    /** Make this a variable; backward writes its gradient into the returned array. */
    public NDArray attachGrad() {
        NDArray grad = Deft.invoke("zeros_like", new NDArray[] {this})[0];
        DeftNative.DeftAutogradMarkVariables(1, raw(new NDArray[] {this}), new int[] {1},
                                             raw(new NDArray[] {grad}));
        return grad;
    }
}
