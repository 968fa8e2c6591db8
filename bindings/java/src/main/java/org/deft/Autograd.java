package org.deft;

import java.util.function.IntUnaryOperator;
import org.deft.internal.DeftNative;

/**
 * Autograd: the per-thread switches as scopes (recording, no_grad, train and predict
 * mode), and gradients of recorded computations. Each scope puts back what it found when
 * closed, on the thread that opened it.
 */
public final class Autograd {
    static {
        Deft.load();
    }

    private Autograd() {}

    /** How backward stores a variable's gradient (DeftGradReq). */
    public enum GradReq {
        /** No gradient. */
        NULL,
        /** Overwrite the gradient array. */
        WRITE,
        /** Add to the gradient array. */
        ADD
    }

    private static int recording(int on) {
        int[] prev = new int[1];
        DeftNative.DeftAutogradSetIsRecording(on, prev);
        return prev[0];
    }

    private static int training(int on) {
        int[] prev = new int[1];
        DeftNative.DeftAutogradSetIsTraining(on, prev);
        return prev[0];
    }

    /** A scope setting a flag to value (a Deft.Scope opens by setting 1: that call sets value). */
    private static Deft.Scope setting(IntUnaryOperator set, int value) {
        boolean[] opened = {false};
        return Deft.scope(v -> {
            int to = opened[0] ? v : value;
            opened[0] = true;
            return set.applyAsInt(to);
        });
    }

    /**
     * @return a scope in which calls that read a variable are recorded, in training mode (as
     *         Python's and MXNet's autograd.record(), Go's WithRecording and Rust's Recording)
     */
    public static Deft.Scope record() {
        // One scope over both flags: the value carries recording in bit 0, training in bit 1.
        return setting(v -> recording(v & 1) | training(v >> 1 & 1) << 1, 3);
    }

    /**
     * @return a scope in which nothing is recorded and operators compute as in
     *     inference: Python's and MXNet's autograd.pause() (Go's WithoutRecording,
     *     Rust's no_grad)
     */
    public static Deft.Scope pause() {
        return setting(v -> recording(v & 1) | training(v >> 1 & 1) << 1, 0);
    }

    /** @return a scope in which operators compute as in training (dropout drops) */
    public static Deft.Scope trainMode() {
        return setting(Autograd::training, 1);
    }

    /** @return a scope in which operators compute as in inference */
    public static Deft.Scope predictMode() {
        return setting(Autograd::training, 0);
    }

    /** @return whether this thread records calls for autograd */
    public static boolean isRecording() {
        int[] on = new int[1];
        DeftNative.DeftAutogradIsRecording(on);
        return on[0] != 0;
    }

    /** @return whether this thread's operators compute in training mode */
    public static boolean isTraining() {
        int[] on = new int[1];
        DeftNative.DeftAutogradIsTraining(on);
        return on[0] != 0;
    }

    /**
     * Make arrays variables: backward stores each one's gradient into its gradient array.
     *
     * @param variables computed arrays
     * @param reqs how each gradient is stored
     * @param grads per variable its gradient array (same shape and dtype; null for NULL)
     */
    public static void markVariables(NDArray[] variables, GradReq[] reqs, NDArray[] grads) {
        if (variables.length != reqs.length || variables.length != grads.length)
            throw new IllegalArgumentException("markVariables: " + variables.length + " variables, "
                                               + reqs.length + " reqs, " + grads.length + " grads");
        int[] codes = new int[reqs.length];
        for (int i = 0; i < reqs.length; i++) codes[i] = reqs[i].ordinal();
        DeftNative.DeftAutogradMarkVariables(variables.length, NDArray.raw(variables), codes,
                                             NDArray.raw(grads));
        java.lang.ref.Reference.reachabilityFence(variables);
        java.lang.ref.Reference.reachabilityFence(grads);
    }

    /**
     * Gradients of heads into every variable they depend on, stored by each one's GradReq.
     *
     * @param heads results of recorded calls
     * @param headGrads per head its gradient, or null for ones (null: ones for all)
     * @param retainGraph keep the recorded values, to differentiate the graph again
     * @param createGraph record the gradient computation too (second derivatives)
     * @throws DeftException when a head depends on no variable or the graph was released
     */
    public static void backward(NDArray[] heads, NDArray[] headGrads, boolean retainGraph,
                                boolean createGraph) {
        DeftNative.DeftAutogradBackward(heads.length, NDArray.raw(heads), NDArray.raw(headGrads),
                                        retainGraph ? 1 : 0, createGraph ? 1 : 0);
        java.lang.ref.Reference.reachabilityFence(heads);
        java.lang.ref.Reference.reachabilityFence(headGrads);
    }

    /**
     * Gradients of heads with respect to variables, as new arrays (torch.autograd.grad); the
     * variables' gradient arrays are not touched.
     *
     * @param heads results of recorded calls (ones as their gradients)
     * @param variables marked variables (one the heads do not depend on gets zeros)
     * @param retainGraph keep the recorded values, to differentiate the graph again
     * @param createGraph record the gradient computation, so the gradients can be
     *        differentiated again
     * @return one gradient per variable
     */
    public static NDArray[] grad(NDArray[] heads, NDArray[] variables, boolean retainGraph,
                                 boolean createGraph) {
        org.deft.internal.DeftNDArray[] out = new org.deft.internal.DeftNDArray[variables.length];
        DeftNative.DeftAutogradComputeGradient(heads.length, NDArray.raw(heads), null,
                                               variables.length, NDArray.raw(variables),
                                               retainGraph ? 1 : 0, createGraph ? 1 : 0, out);
        java.lang.ref.Reference.reachabilityFence(heads);
        java.lang.ref.Reference.reachabilityFence(variables);
        NDArray[] grads = new NDArray[out.length];
        for (int i = 0; i < out.length; i++) grads[i] = new NDArray(out[i]);
        return grads;
    }

    /**
     * @param heads results of recorded calls
     * @param variables marked variables
     * @return one gradient per variable, the graph released after
     */
    public static NDArray[] grad(NDArray[] heads, NDArray... variables) {
        return grad(heads, variables, false, false);
    }
}
