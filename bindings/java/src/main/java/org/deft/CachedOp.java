package org.deft;

import org.deft.internal.DeftNative;

/** A symbol compiled to a memory-planned executor. */
public final class CachedOp extends Owned<org.deft.internal.DeftCachedOp> {
    /** How the executor is made (DeftCachedOpFlag). */
    public enum Flag {
        /** One buffer per entry, no memory plan (for comparison and debugging). */
        NO_MEMORY_PLAN(1),
        /**
         * Forward and backward in one run: the inputs are the arguments, a head gradient for
         * each output whose gradient reads one, then the auxiliary states; the outputs are the
         * symbol's, then the gradient of each argument (see DEFT_CACHED_OP_BACKWARD).
         */
        BACKWARD(2),
        /** Apply the Fuse pass before planning. */
        FUSE(4);

        private final int bit;

        Flag(int bit) {
            this.bit = bit;
        }
    }

    /** Figures of the last run's memory plan (DeftPlanStat). */
    public enum PlanStat {
        /** The arena this executor allocated. */
        ARENA_BYTES,
        /** One buffer per intermediate entry. */
        NAIVE_BYTES,
        /** With in-place writes but no sharing. */
        INPLACE_ONLY_BYTES,
        /** With sharing but no in-place writes. */
        SHARING_ONLY_BYTES
    }

    private final int outputs;

    /** @param symbol the graph, run with a memory plan (captured: it may be closed after) */
    public CachedOp(Symbol symbol) {
        this(symbol, new Flag[0]);
    }

    /**
     * @param symbol the graph (captured: the symbol may be closed after)
     * @param flags how the executor is made
     * @throws DeftException with BACKWARD, for an operator without a gradient
     */
    public CachedOp(Symbol symbol, Flag... flags) {
        this(compile(symbol, flags), outputs(symbol, flags));
    }

    private CachedOp(org.deft.internal.DeftCachedOp handle, int outputs) {
        super(handle, handle::delete);
        this.outputs = outputs;
    }

    private static int bits(Flag[] flags) {
        int bits = 0;
        for (Flag f : flags) bits |= f.bit;
        return bits;
    }

    /** The symbol's outputs, and with BACKWARD a gradient per argument. */
    private static int outputs(Symbol symbol, Flag[] flags) {
        int n = symbol.listOutputs().length;
        return (bits(flags) & Flag.BACKWARD.bit) != 0 ? n + symbol.listInputs().length : n;
    }

    private static org.deft.internal.DeftCachedOp compile(Symbol symbol, Flag[] flags) {
        org.deft.internal.DeftCachedOp[] out = new org.deft.internal.DeftCachedOp[1];
        DeftNative.DeftCachedOpCreate(symbol.handle(), bits(flags), out);
        return out[0];
    }

    /**
     * Run the graph.
     *
     * @param inputs its arguments in listInputs() order (with BACKWARD, then the head gradients)
     * @return its outputs (with BACKWARD, then the gradient of each argument)
     */
    public NDArray[] call(NDArray... inputs) {
        org.deft.internal.DeftNDArray[] outs = new org.deft.internal.DeftNDArray[outputs];
        DeftNative.DeftCachedOpInvoke(get(), inputs.length, NDArray.raw(inputs), outs);
        NDArray[] result = new NDArray[outs.length];
        for (int i = 0; i < outs.length; i++) result[i] = new NDArray(outs[i]);
        return result;
    }

    /**
     * @param stat which figure
     * @return bytes of the memory plan of the last run
     * @throws DeftException before the first run
     */
    public long planBytes(PlanStat stat) {
        long[] out = new long[1];
        DeftNative.DeftCachedOpGetPlanStat(get(), stat.ordinal(), out);
        return out[0];
    }
}
