package org.deft;

import org.deft.internal.DeftNative;

/** A symbol compiled to a memory-planned executor. */
public final class CachedOp extends Owned<org.deft.internal.DeftCachedOp> {
    private final int outputs;

    public CachedOp(Symbol symbol) {
        this(compile(symbol), symbol.listOutputs().length);
    }

    private CachedOp(org.deft.internal.DeftCachedOp handle, int outputs) {
        super(handle, handle::delete);
        this.outputs = outputs;
    }

    private static org.deft.internal.DeftCachedOp compile(Symbol symbol) {
        org.deft.internal.DeftCachedOp[] out = new org.deft.internal.DeftCachedOp[1];
        DeftNative.DeftCachedOpCreate(symbol.handle(), 0, out);
        return out[0];
    }

    /** Run the graph on its arguments, in listInputs() order. */
    public NDArray[] call(NDArray... inputs) {
        org.deft.internal.DeftNDArray[] outs = new org.deft.internal.DeftNDArray[outputs];
        DeftNative.DeftCachedOpInvoke(get(), inputs.length, NDArray.raw(inputs), outs);
        NDArray[] result = new NDArray[outs.length];
        for (int i = 0; i < outs.length; i++) result[i] = new NDArray(outs[i]);
        return result;
    }
}
