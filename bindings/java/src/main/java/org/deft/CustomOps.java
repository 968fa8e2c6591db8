package org.deft;

import org.deft.internal.DeftNative;

/** Registration of custom operators, and the entry points their native callbacks use. */
public final class CustomOps {
    static {
        Deft.load();
    }

    private CustomOps() {}

    /**
     * Register op as operator {@code name} with numInputs inputs and one output;
     * it is then an operator like any other (Deft.invoke, export, autograd).
     */
    public static void register(String name, int numInputs, CustomOp op, boolean hasBackward) {
        DeftNative.DeftJavaCustomOpRegister(name, numInputs, op, hasBackward ? 1 : 0);
    }

    private static NDArray lent(long ptr) {
        return new NDArray(new org.deft.internal.DeftNDArray(ptr, false));
    }

    private static NDArray[] lent(long[] ptrs) {
        NDArray[] out = new NDArray[ptrs.length];
        for (int i = 0; i < ptrs.length; i++) out[i] = lent(ptrs[i]);
        return out;
    }

    static long[] infer(Object handler, long[][] inShapes, int[] inDTypes) {
        CustomOp op = (CustomOp) handler;
        long[] shape = op.inferShape(inShapes, inDTypes);
        long[] out = new long[shape.length + 1];
        out[0] = op.inferDType(inDTypes);
        System.arraycopy(shape, 0, out, 1, shape.length);
        return out;
    }

    static void forward(Object handler, long[] inputs, long output, boolean isTrain) {
        ((CustomOp) handler).forward(lent(inputs), lent(output), isTrain);
    }

    static void backward(Object handler, long outGrad, long[] inputs, long output, long[] inGrads) {
        ((CustomOp) handler).backward(lent(outGrad), lent(inputs), lent(output), lent(inGrads));
    }
}
