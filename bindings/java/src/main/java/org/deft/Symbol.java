package org.deft;

import org.deft.internal.DeftNative;

/** A symbolic graph: exported from deferred compute, or loaded from JSON. */
public final class Symbol extends Owned<org.deft.internal.DeftSymbol> {
    Symbol(org.deft.internal.DeftSymbol handle) {
        super(handle, handle::delete);
    }

    org.deft.internal.DeftSymbol handle() {
        return get();
    }

    public static Symbol fromJson(String json) {
        org.deft.internal.DeftSymbol[] out = new org.deft.internal.DeftSymbol[1];
        DeftNative.DeftSymbolCreateFromJSON(json, out);
        return new Symbol(out[0]);
    }

    /** The handle keeps the strings it returns: one caller at a time. */
    public synchronized String toJson() {
        String[] out = new String[1];
        DeftNative.DeftSymbolSaveToJSON(handle(), out);
        return out[0];
    }

    public synchronized String[] listInputs() {
        String[][] out = new String[1][];
        DeftNative.DeftSymbolListArguments(handle(), out);
        return out[0];
    }

    public synchronized String[] listOutputs() {
        String[][] out = new String[1][];
        DeftNative.DeftSymbolListOutputs(handle(), out);
        return out[0];
    }

    /** The states the graph updates in place (running statistics, optimizer states). */
    public synchronized String[] listAuxiliaryStates() {
        String[][] out = new String[1][];
        DeftNative.DeftSymbolListAuxiliaryStates(handle(), out);
        return out[0];
    }

    /**
     * The training step of this loss (its output 0): one {@link CachedOp} call computes the
     * loss, its gradient with respect to {@code params} and the optimizer's update of each
     * parameter, in place.
     *
     * <p>The step's inputs are this symbol's, then "step_hyper" (float64, 7 values: lr, wd,
     * rescale_grad, clip_gradient (negative: none), momentum or beta1, beta2, epsilon); its
     * auxiliary states are this symbol's, then each parameter's optimizer states
     * "&lt;param&gt;_mom", or "&lt;param&gt;_mean" and "&lt;param&gt;_var", zeros before the
     * first step. Its outputs are this symbol's, then one empty array. See
     * DeftSymbolTrainStep in deft/symbol.h.
     *
     * @param optimizer "sgd", "sgd_mom", "adam" or "adamw"
     * @param params the names of the arguments to train
     * @throws DeftException on an unknown optimizer or a name that is not an argument
     */
    public Symbol trainStep(String optimizer, String... params) {
        org.deft.internal.DeftSymbol[] out = new org.deft.internal.DeftSymbol[1];
        DeftNative.DeftSymbolTrainStep(handle(), params.length, params, optimizer, out);
        return new Symbol(out[0]);
    }
}
