package org.deft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** Symbol.trainStep: a whole training step as one CachedOp call. */
class TrainStepTest {
    /** loss = square(w * x), elementwise: with a head gradient of ones, the gradient is 2 w x^2. */
    private static Symbol squaredLoss(NDArray x, NDArray w) {
        NDArray loss;
        try (Deft.Scope scope = Deft.deferredCompute()) {
            loss = w.call("elemwise_mul", new NDArray[] {x}).call("square", new NDArray[0]);
        }
        return Deft.export(new String[] {"x", "w"}, new NDArray[] {x, w}, new String[] {"loss"},
                           new NDArray[] {loss});
    }

    /**
     * Three steps update w and its momentum in place as MXNet's SGD with momentum does:
     * mom = momentum mom - lr (rescale grad + wd w); w += mom. Each step's loss is that of the
     * weight before it.
     */
    @Test
    void stepsFollowSgdMomentum() {
        double[] xs = {1, -2, 0.5}, want = {0.5, 0.25, -1}, wantMom = new double[3];
        double lr = 0.1, wd = 0.01, rescale = 0.5, momentum = 0.9;
        NDArray x = NDArray.of(xs, 3), w = NDArray.of(want, 3);
        NDArray hyper = NDArray.of(new double[] {lr, wd, rescale, -1, momentum, 0, 0}, 7);
        NDArray mom = NDArray.of(new double[3], 3);
        try (Symbol loss = squaredLoss(x, w); Symbol step = loss.trainStep("sgd_mom", "w");
             CachedOp run = new CachedOp(step)) {
            String[] args = step.listInputs(), aux = step.listAuxiliaryStates();
            assertArrayEquals(new String[] {"w_mom"}, aux);
            assertEquals(3, args.length);
            Map<String, NDArray> given = Map.of("x", x, "w", w, "step_hyper", hyper, "w_mom", mom);
            NDArray[] inputs = new NDArray[args.length + aux.length];
            for (int i = 0; i < inputs.length; i++) {
                String name = i < args.length ? args[i] : aux[i - args.length];
                inputs[i] = given.get(name);
                assertNotNull(inputs[i], "unexpected step input " + name);
            }
            for (int s = 0; s < 3; s++) {
                NDArray[] outs = run.call(inputs);
                assertEquals(2, outs.length); // the loss, the updates' empty output
                double[] wantLoss = new double[3];
                for (int i = 0; i < 3; i++) {
                    wantLoss[i] = want[i] * xs[i] * want[i] * xs[i];
                    double grad = 2 * want[i] * xs[i] * xs[i];
                    wantMom[i] = momentum * wantMom[i] - lr * (rescale * grad + wd * want[i]);
                    want[i] += wantMom[i];
                }
                assertArrayEquals(wantLoss, outs[0].toDoubleArray(), 1e-12, "loss, step " + s);
                assertArrayEquals(want, w.toDoubleArray(), 1e-12, "w, step " + s);
                assertArrayEquals(wantMom, mom.toDoubleArray(), 1e-12, "w_mom, step " + s);
            }
        }
    }

    @Test
    void badStepsNameWhatIsWrong() {
        NDArray x = NDArray.of(new double[] {1, 2}, 2), w = NDArray.of(new double[] {3, 4}, 2);
        try (Symbol loss = squaredLoss(x, w)) {
            DeftException e = assertThrows(DeftException.class, () -> loss.trainStep("lbfgs", "w"));
            assertEquals(DeftException.Kind.VALUE, e.kind());
            assertTrue(e.getMessage().contains(
                           "optimizer is 'lbfgs', expected one of sgd, sgd_mom, adam, adamw"),
                       e.getMessage());
            e = assertThrows(DeftException.class, () -> loss.trainStep("sgd_mom", "v"));
            assertEquals(DeftException.Kind.VALUE, e.kind());
            assertTrue(e.getMessage().contains(
                           "params[0] is 'v', which is not an argument of the loss"),
                       e.getMessage());
        }
    }
}
