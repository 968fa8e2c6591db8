package org.deft;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.deft.internal.DeftNDArray;

/**
 * Zero-copy exchange of arrays through DLPack, the convention of NumPy, PyTorch, JAX and
 * Arrow: {@link #export} lends an array's memory as a {@link Tensor}, whose
 * {@link Tensor#buffer()} views it as a direct ByteBuffer; {@link #toArray} makes an array
 * over a tensor, and {@link #wrap} makes one over a direct ByteBuffer's memory. No copy is
 * made either way: writes through one side are seen by the other.
 */
public final class DLPack {
    static {
        Deft.load();
    }

    private DLPack() {}

    /**
     * A DLPack tensor (a DLManagedTensor) that this side owns until {@link #close()} gives
     * the memory back (its deleter runs) or {@link DLPack#toArray} takes it over. The tensor
     * holds its own reference to the memory: the array it came from may be closed first.
     */
    public static final class Tensor implements AutoCloseable {
        private long pointer; // 0 once given back or taken over
        private final DType dtype;
        private final long[] shape;
        private final Device device;

        private Tensor(long pointer) {
            this.pointer = pointer;
            long[] d = DLPack.describe(pointer);
            this.dtype = dtypeOf((int) d[0], (int) d[1], (int) d[2]);
            this.device = d[3] == Device.Type.GPU.code() ? Device.gpu((int) d[4]) : Device.CPU;
            this.shape = java.util.Arrays.copyOfRange(d, 6, 6 + (int) d[5]);
        }

        /**
         * The address of the memory a DLPack consumer reads (a {@code DLManagedTensor*}),
         * for handing the tensor to another library through its own native code.
         *
         * @return the DLManagedTensor pointer
         * @throws IllegalStateException after close() or toArray()
         */
        public synchronized long pointer() {
            if (pointer == 0) throw new IllegalStateException("the DLPack tensor was given back");
            return pointer;
        }

        /** @return the element type */
        public DType dtype() {
            return dtype;
        }

        /** @return the dimensions */
        public long[] shape() {
            return shape.clone();
        }

        /** @return where the memory is */
        public Device device() {
            return device;
        }

        /**
         * The memory, without a copy, in the platform's byte order (use asFloatBuffer() and
         * friends). The view is valid until close(): reading it after is undefined.
         *
         * @return a direct ByteBuffer over the tensor's memory
         * @throws DeftException (VALUE) for a tensor that is not in CPU memory
         */
        public synchronized ByteBuffer buffer() {
            return DLPack.buffer(pointer()).order(ByteOrder.nativeOrder());
        }

        synchronized long takeOver() {
            long p = pointer();
            pointer = 0;
            return p;
        }

        /** Give the memory back (the tensor's deleter); a second close() does nothing. */
        @Override
        public synchronized void close() {
            if (pointer == 0) return;
            DLPack.free(pointer);
            pointer = 0;
        }
    }

    /**
     * Lend an array's memory (the array is computed first if lazy or pending).
     *
     * @param array an open array
     * @return a tensor over its memory, to close when done
     */
    public static Tensor export(NDArray array) {
        long p = export(DeftNDArray.getCPtr(array.handle()));
        java.lang.ref.Reference.reachabilityFence(array);
        try {
            return new Tensor(p);
        } catch (RuntimeException e) {
            free(p);
            throw e;
        }
    }

    /**
     * Make an array over a tensor's memory, without a copy: the array takes the tensor over
     * (it is then closed here and its deleter runs when the array's memory is freed).
     *
     * @param tensor an open tensor: CPU memory, compact row-major, of a dtype deft has
     * @return the array
     * @throws DeftException when deft cannot hold the tensor; it stays open then
     */
    public static NDArray toArray(Tensor tensor) {
        synchronized (tensor) {
            long h = toArray(tensor.pointer());
            tensor.takeOver();
            return new NDArray(new DeftNDArray(h, true));
        }
    }

    /**
     * Make an array over a direct ByteBuffer's memory, without a copy, from its position 0
     * in the platform's byte order: writes through the buffer change the array. The array
     * keeps the buffer reachable until its memory is freed.
     *
     * @param buffer a direct buffer holding at least the shape's bytes, aligned for dtype
     * @param dtype the element type
     * @param shape the dimensions
     * @return the array
     * @throws DeftException (VALUE) for a heap buffer, a buffer too small, or a misaligned one
     */
    public static NDArray wrap(ByteBuffer buffer, DType dtype, long... shape) {
        int[] dl = dlpackType(dtype);
        long h = fromBuffer(buffer, dl[0], dl[1], shape);
        return new NDArray(new DeftNDArray(h, true));
    }

    /** DLPack's type codes (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4) and bits of each dtype. */
    private static int[] dlpackType(DType t) {
        switch (t) {
        case FLOAT32: return new int[] {2, 32};
        case FLOAT64: return new int[] {2, 64};
        case FLOAT16: return new int[] {2, 16};
        case BFLOAT16: return new int[] {4, 16};
        case INT8: return new int[] {0, 8};
        case INT32: return new int[] {0, 32};
        case INT64: return new int[] {0, 64};
        default: return new int[] {1, 8}; // uint8, and bool (one byte, as deft exports it)
        }
    }

    private static DType dtypeOf(int code, int bits, int lanes) {
        for (DType t : DType.values()) {
            int[] dl = dlpackType(t);
            if (t != DType.BOOL && dl[0] == code && dl[1] == bits && lanes == 1) return t;
        }
        throw new DeftException(DeftException.Kind.TYPE.ordinal(), "deft has no dtype for DLPack code "
                                    + code + ", " + bits + " bits, " + lanes + " lanes");
    }

    private static native long export(long array);

    private static native long[] describe(long tensor);

    private static native ByteBuffer buffer(long tensor);

    private static native void free(long tensor);

    private static native long toArray(long tensor);

    private static native long fromBuffer(ByteBuffer buffer, int code, int bits, long[] shape);
}
