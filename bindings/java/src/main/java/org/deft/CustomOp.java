package org.deft;

/**
 * An operator written in Java, registered with {@link CustomOps#register}.
 * Its methods run on deft's callback threads; the arrays they get are lent
 * for the call (do not keep them, do not close them).
 */
public interface CustomOp {
    /** The output's shape from the inputs' shapes and dtypes. */
    long[] inferShape(long[][] inShapes, int[] inDTypes);

    /** The output's dtype (a DeftDType code); default: input 0's. */
    default int inferDType(int[] inDTypes) {
        return inDTypes[0];
    }

    /** Fill output from inputs (write it with an operator, e.g. Deft.invokeInto("_copyto", ...)). */
    void forward(NDArray[] inputs, NDArray output, boolean isTrain);

    /** Fill inGrads from the output's gradient; only called when registered with one. */
    default void backward(NDArray outGrad, NDArray[] inputs, NDArray output, NDArray[] inGrads) {
        throw new UnsupportedOperationException("no backward");
    }
}
