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
}
