package org.deft;

import org.deft.internal.DeftNative;
import org.deft.internal.DeftOp;

/**
 * Entry points: operators by name, the deferred-compute and recording scopes,
 * and the library's counters. Loads the JNI library {@code deftjni}.
 */
public final class Deft {
    static {
        System.loadLibrary("deftjni");
    }

    private Deft() {}

    /** Ensure the native library is loaded (every class calls this first). */
    static void load() {}

    /** A per-thread mode switched on for the scope and restored by close(). */
    public static final class Scope implements AutoCloseable {
        private final java.util.function.IntUnaryOperator set;
        private final int previous;
        private final Thread owner = Thread.currentThread();
        private boolean closed;

        private Scope(java.util.function.IntUnaryOperator set) {
            this.set = set;
            this.previous = set.applyAsInt(1);
        }

        @Override
        public void close() {
            if (closed) return;
            if (Thread.currentThread() != owner)
                throw new IllegalStateException("a deft scope must be closed on the thread that opened it");
            closed = true;
            set.applyAsInt(previous);
        }
    }

    /** Operator calls on this thread record a graph and return lazy arrays until close(). */
    public static Scope deferredCompute() {
        return new Scope(on -> {
            int[] prev = new int[1];
            DeftNative.DeftSetIsDeferredCompute(on, prev);
            return prev[0];
        });
    }

    /** Calls on this thread that read a variable are recorded for autograd until close(). */
    public static Scope recording() {
        return new Scope(on -> {
            int[] prev = new int[1];
            DeftNative.DeftAutogradSetIsRecording(on, prev);
            return prev[0];
        });
    }

    static DeftOp op(String name) {
        DeftOp[] op = new DeftOp[1];
        DeftNative.DeftGetOperator(name, op);
        return op[0];
    }

    /**
     * Run operator {@code name}; params alternate key and value, MXNet style
     * ({@code "axis", "(0,1)"}).
     */
    public static NDArray[] invoke(String name, NDArray[] inputs, String... params) {
        if (params.length % 2 != 0)
            throw new IllegalArgumentException("params must alternate key and value");
        String[] keys = new String[params.length / 2], vals = new String[params.length / 2];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = params[2 * i];
            vals[i] = params[2 * i + 1];
        }
        org.deft.internal.DeftNDArray[] outs = new org.deft.internal.DeftNDArray[16];
        DeftNative.DeftImperativeInvoke(op(name), inputs.length, NDArray.raw(inputs), outs,
                                        keys.length, keys, vals);
        int n = 0;
        while (n < outs.length && outs[n] != null) n++;
        NDArray[] result = new NDArray[n];
        for (int i = 0; i < n; i++) result[i] = new NDArray(outs[i]);
        return result;
    }

    /** Run operator {@code name} writing into {@code outputs} (existing arrays). */
    public static void invokeInto(String name, NDArray[] inputs, NDArray[] outputs,
                                  String... params) {
        String[] keys = new String[params.length / 2], vals = new String[params.length / 2];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = params[2 * i];
            vals[i] = params[2 * i + 1];
        }
        DeftNative.DeftImperativeInvoke(op(name), inputs.length, NDArray.raw(inputs),
                                        NDArray.raw(outputs), keys.length, keys, vals);
    }

    /** Block until every pending operation is done. */
    public static void waitAll() {
        DeftNative.DeftWaitAll();
    }

    /** NDArray handles alive in the process. */
    public static long liveArrays() {
        long[] n = new long[1];
        DeftNative.DeftGetLiveNDArrayCount(n);
        return n[0];
    }

    /** GPUs deft can use: 0 without CUDA, a driver or a GPU. */
    public static int gpuCount() {
        int[] n = new int[1];
        DeftNative.DeftGetGPUCount(n);
        return n[0];
    }

    /** Bytes of CPU array storage in use. */
    public static long liveBytes() {
        long[] n = new long[1];
        DeftNative.DeftGetMemoryStat(1, 0, 0, n);
        return n[0];
    }

    /** Gradients of heads into the arrays given to each variable's attachGrad(). */
    public static void backward(NDArray... heads) {
        DeftNative.DeftAutogradBackward(heads.length, NDArray.raw(heads), null, 0, 0);
    }

    /** The recorded graph from inputs to outputs, with the argument names in order. */
    public static Symbol export(String[] inputNames, NDArray[] inputs, String[] outputNames,
                                NDArray[] outputs) {
        org.deft.internal.DeftSymbol[] sym = new org.deft.internal.DeftSymbol[1];
        DeftNative.DeftNDArrayGetDeferredComputeSymbol(NDArray.raw(inputs), NDArray.raw(outputs),
                                                       inputNames, outputNames, inputs.length,
                                                       outputs.length, sym);
        return new Symbol(sym[0]);
    }

    /** A scope over a per-thread flag: set(value) sets it and returns the previous value. */
    static Scope scope(java.util.function.IntUnaryOperator set) {
        return new Scope(set);
    }
}
