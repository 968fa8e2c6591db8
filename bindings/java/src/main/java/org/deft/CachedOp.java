package org.deft;

import org.deft.internal.DeftNative;

/** A symbol compiled to a memory-planned executor. */
public final class CachedOp implements AutoCloseable {
    static {
        Deft.load();
    }

    private final org.deft.internal.DeftCachedOp handle;
    private final int outputs;
    private volatile boolean closed;

    public CachedOp(Symbol symbol) {
        org.deft.internal.DeftCachedOp[] out = new org.deft.internal.DeftCachedOp[1];
        DeftNative.DeftCachedOpCreate(symbol.handle(), 0, out);
        handle = out[0];
        outputs = symbol.listOutputs().length;
    }

    /** Run the graph on its arguments, in listInputs() order. */
    public NDArray[] call(NDArray... inputs) {
        if (closed) throw new IllegalStateException("the CachedOp was closed");
        org.deft.internal.DeftNDArray[] outs = new org.deft.internal.DeftNDArray[outputs];
        DeftNative.DeftCachedOpInvoke(handle, inputs.length, NDArray.raw(inputs), outs);
        NDArray[] result = new NDArray[outs.length];
        for (int i = 0; i < outs.length; i++) result[i] = new NDArray(outs[i]);
        return result;
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        handle.delete();
    }
}
