package org.deft;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.deft.internal.DeftNative;

/**
 * An n-dimensional array on the CPU, computed asynchronously. close() frees
 * its handle at once (use try-with-resources); a Cleaner frees it when the
 * object becomes unreachable otherwise. Methods called after close() throw
 * IllegalStateException and never reach freed memory.
 */
public final class NDArray extends Owned<org.deft.internal.DeftNDArray> {
    NDArray(org.deft.internal.DeftNDArray handle) {
        super(handle, handle::delete);
    }

    org.deft.internal.DeftNDArray handle() {
        return get();
    }

    static org.deft.internal.DeftNDArray[] raw(NDArray[] arrays) {
        if (arrays == null) return null;
        org.deft.internal.DeftNDArray[] out = new org.deft.internal.DeftNDArray[arrays.length];
        for (int i = 0; i < arrays.length; i++) out[i] = arrays[i] == null ? null : arrays[i].handle();
        return out;
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
        return new NDArray(out[0]);
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
        String have = dtype();
        if (!have.equals(want))
            throw new DeftException(DeftException.Kind.TYPE.ordinal(),
                                    "the array is " + have + ", not " + want + ": " + reader
                                        + " reads " + want + " arrays (cast it with Cast first)");
        long[] nbytes = new long[1];
        DeftNative.DeftNDArrayGetNBytes(handle(), nbytes);
        ByteBuffer b = buffer(nbytes[0]);
        DeftNative.DeftNDArrayCopyToHost(handle(), b);
        return b;
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
        DeftNative.DeftNDArrayGetIsDeferredCompute(new org.deft.internal.DeftNDArray[] {handle()},
                                                   1, status);
        return status[0] != 0;
    }

    /** Run operator name with this array as its first input; its first output. */
    public NDArray call(String name, NDArray[] others, String... params) {
        NDArray[] inputs = new NDArray[others.length + 1];
        inputs[0] = this;
        System.arraycopy(others, 0, inputs, 1, others.length);
        return Deft.invoke(name, inputs, params)[0];
    }

    /** Make this a variable; backward writes its gradient into the returned array. */
    public NDArray attachGrad() {
        NDArray grad = Deft.invoke("zeros_like", new NDArray[] {this})[0];
        DeftNative.DeftAutogradMarkVariables(1, raw(new NDArray[] {this}), new int[] {1},
                                             raw(new NDArray[] {grad}));
        return grad;
    }
}
