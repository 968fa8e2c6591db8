package org.deft;

import java.util.Arrays;

/**
 * One call of an operator as the generated functions of {@link Nd} build it: the inputs and
 * the parameters, written as the registry parses them, then {@link Deft#invoke}. A parameter
 * whose value is null is left out (the operator's default).
 */
final class OpArgs {
    private NDArray[] inputs;
    private int numInputs;
    private String[] params;
    private int numParams; // strings in params: two per parameter

    OpArgs(int inputs, int params) {
        this.inputs = new NDArray[inputs];
        this.params = new String[2 * params];
    }

    OpArgs input(NDArray a) {
        if (numInputs == inputs.length) inputs = Arrays.copyOf(inputs, 2 * numInputs + 1);
        inputs[numInputs++] = a;
        return this;
    }

    /** Any number of inputs (a variadic operator's). */
    OpArgs inputs(NDArray[] arrays) {
        for (NDArray a : arrays) input(a);
        return this;
    }

    /**
     * The optional inputs given, which must come first: an input is known by its position, so
     * a later one without an earlier one cannot be passed.
     */
    OpArgs optionalInputs(String op, NDArray... optional) {
        int given = 0;
        while (given < optional.length && optional[given] != null) given++;
        for (int later = given + 1; later < optional.length; later++)
            if (optional[later] != null)
                throw new DeftException(DeftException.Kind.VALUE.ordinal(),
                                        op + ": optional input " + (numInputs + later)
                                            + " is given but input " + (numInputs + given)
                                            + " is not");
        for (int i = 0; i < given; i++) input(optional[i]);
        return this;
    }

    private OpArgs put(String key, String value) {
        if (numParams == params.length) params = Arrays.copyOf(params, 2 * numParams + 2);
        params[numParams++] = key;
        params[numParams++] = value;
        return this;
    }

    /** A parameter that takes None, set to None. */
    OpArgs none(String key) {
        return put(key, "None");
    }

    OpArgs integer(String key, Long v) {
        return v == null ? this : put(key, Long.toString(v));
    }

    /** Whole numbers as integers (the usual x + 1), others as Java writes doubles. */
    OpArgs real(String key, Double v) {
        if (v == null) return this;
        double d = v;
        long whole = (long) d;
        boolean exact = whole == d && Math.abs(whole) < (1L << 53);
        return put(key, exact ? Long.toString(whole) : Double.toString(d));
    }

    OpArgs bool(String key, Boolean v) {
        return v == null ? this : put(key, v ? "true" : "false");
    }

    /** A tuple as the registry parses it: (2,3), (2,), (). */
    OpArgs tuple(String key, long[] v) {
        if (v == null) return this;
        StringBuilder b = new StringBuilder("(");
        for (int i = 0; i < v.length; i++) b.append(i > 0 ? "," : "").append(v[i]);
        return put(key, b.append(v.length == 1 ? ",)" : ")").toString());
    }

    /** A string, enum word, dtype or device, as its toString() writes it. */
    OpArgs text(String key, Object v) {
        return v == null ? this : put(key, v.toString());
    }

    NDArray[] all(String op) {
        return Deft.invoke(op, Arrays.copyOf(inputs, numInputs), Arrays.copyOf(params, numParams));
    }

    NDArray first(String op) {
        return all(op)[0];
    }
}
