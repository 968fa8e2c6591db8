package org.deft;

import java.lang.ref.Reference;
import java.util.concurrent.ConcurrentHashMap;
import org.deft.internal.DeftNative;
import org.deft.internal.DeftOp;

/**
 * Entry points: operators by name, the deferred-compute and recording scopes,
 * and the library's counters. Loads the native libraries (see NativeLoader:
 * from the jar, else from -Ddeft.library.path or java.library.path).
 */
public final class Deft {
    static {
        NativeLoader.load();
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

    /** An operator found by name, and the output room its calls start with. */
    private static final class Op {
        final long handle;
        volatile int room = 1; // the most outputs a call of it made so far

        Op(long handle) {
            this.handle = handle;
        }
    }

    /** Operators by name: a registry entry is never freed, so it is looked up once. */
    private static final ConcurrentHashMap<String, Op> OPS = new ConcurrentHashMap<>();

    private static Op lookup(String name) {
        Op op = OPS.get(name);
        if (op == null) op = OPS.computeIfAbsent(name, n -> new Op(Jni.op(n)));
        return op;
    }

    /** The operator named name (DeftException if there is none). */
    static DeftOp op(String name) {
        return new DeftOp(lookup(name).handle, false);
    }

    private static void checkParams(String[] params) {
        if (params.length % 2 != 0)
            throw new IllegalArgumentException("params must alternate key and value, got "
                                               + params.length + " strings");
    }

    /**
     * Run operator {@code name}; params alternate key and value, MXNet style
     * ({@code "axis", "(0,1)"}). Returns every output the operator makes (up
     * to DEFT_MAX_OUTPUTS, 64, as in C).
     */
    public static NDArray[] invoke(String name, NDArray[] inputs, String... params) {
        checkParams(params);
        Op op = lookup(name);
        byte[] text = Jni.params(params);
        try {
            for (;;) {
                int room = op.room, nin = inputs.length;
                long[] slots = NDArray.pointers(inputs, room + 1);
                int n = Jni.invoke(op.handle, slots, nin, text, params.length);
                if (n < 0) { // more outputs than the room: nothing was made
                    op.room = Math.max(op.room, -n);
                    continue;
                }
                NDArray[] result = new NDArray[n];
                for (int i = 0; i < n; i++) result[i] = NDArray.owning(slots[nin + i]);
                NativeMemory.note(slots[nin + room]);
                return result;
            }
        } finally {
            Reference.reachabilityFence(inputs); // C may read them until Jni.invoke returns
        }
    }

    /**
     * Run operator {@code name} writing into {@code outputs}: an array
     * given receives its output in place; a null entry receives a new array.
     */
    public static void invokeInto(String name, NDArray[] inputs, NDArray[] outputs,
                                  String... params) {
        checkParams(params);
        Op op = lookup(name);
        try {
            int nin = inputs.length, room = outputs.length;
            long[] slots = NDArray.pointers(inputs, room + 1);
            for (int i = 0; i < room; i++) slots[nin + i] = outputs[i] == null ? 0 : outputs[i].ptr();
            int n = Jni.invoke(op.handle, slots, nin, Jni.params(params), params.length);
            if (n < 0)
                throw new DeftException(DeftException.Kind.VALUE.ordinal(),
                                        "operator " + name + " makes " + -n + " outputs, but "
                                            + "outputs has room for " + room);
            for (int i = 0; i < n; i++)
                if (outputs[i] == null) outputs[i] = NDArray.owning(slots[nin + i]);
            NativeMemory.note(slots[nin + room]);
        } finally {
            Reference.reachabilityFence(inputs);
            Reference.reachabilityFence(outputs);
        }
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
        return Jni.liveBytes();
    }

    /**
     * Set the bound on native memory held by dropped arrays and return the
     * previous one: when deft's live CPU bytes pass max(bytes, twice what
     * stayed live after the last such collection), the binding runs
     * System.gc() and waits for the Cleaner to free the arrays it found.
     * 0 turns it off. The environment variable DEFT_JAVA_GC_BYTES sets it at
     * start (default 33554432, 32 MiB).
     */
    public static long setNativeGCThreshold(long bytes) {
        return NativeMemory.setThreshold(bytes);
    }

    /** The collections the bound of setNativeGCThreshold has run so far. */
    public static long nativeGCRuns() {
        return NativeMemory.runs();
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
