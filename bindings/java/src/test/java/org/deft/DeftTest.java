package org.deft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class DeftTest {
    private static NDArray plus(NDArray x, String s) {
        return x.call("_plus_scalar", new NDArray[0], "scalar", s);
    }

    @Test
    void readersCheckTheDtype() {
        try (NDArray x = NDArray.of(new float[] {1.5f, -2f, 3f}, 3);
             NDArray i = x.call("Cast", new NDArray[0], "dtype", "int64");
             NDArray j = x.call("Cast", new NDArray[0], "dtype", "int32");
             NDArray u = x.call("Cast", new NDArray[0], "dtype", "uint8");
             NDArray d = NDArray.of(new double[] {0.25, 4}, 2)) {
            assertEquals("int64", i.dtype());
            assertArrayEquals(new long[] {1, -2, 3}, i.toLongArray());
            assertArrayEquals(new int[] {1, -2, 3}, j.toIntArray());
            assertArrayEquals(new byte[] {1, 0, 3}, u.toByteArray());
            assertArrayEquals(new double[] {0.25, 4}, d.toDoubleArray());
            DeftException e = assertThrows(DeftException.class, i::toFloatArray);
            assertEquals(DeftException.Kind.TYPE, e.kind());
            assertEquals("the array is int64, not float32: toFloatArray reads float32 arrays "
                             + "(cast it with Cast first)",
                         e.getMessage());
            assertThrows(DeftException.class, x::toDoubleArray);
            assertThrows(DeftException.class, d::toLongArray);
        }
    }

    @Test
    void deferredComputeExport() {
        try (NDArray x = NDArray.of(new float[] {1, 2, 3}, 3)) {
            NDArray y, z;
            try (Deft.Scope scope = Deft.deferredCompute()) {
                NDArray a = plus(x, "5");
                y = a.call("elemwise_mul", new NDArray[] {a});
                z = x.call("elemwise_mul", new NDArray[] {x});
            }
            assertTrue(y.isLazy());
            assertArrayEquals(new long[] {3}, y.shape());
            try (Symbol sym = Deft.export(new String[] {"x"}, new NDArray[] {x},
                                          new String[] {"y", "z"}, new NDArray[] {y, z})) {
                assertArrayEquals(new String[] {"x"}, sym.listInputs());
                assertArrayEquals(new float[] {36, 49, 64}, y.toFloatArray());
                try (Symbol again = Symbol.fromJson(sym.toJson());
                     CachedOp run = new CachedOp(again);
                     NDArray x2 = NDArray.of(new float[] {0, 1, 2}, 3)) {
                    NDArray[] outs = run.call(x2);
                    assertArrayEquals(new float[] {25, 36, 49}, outs[0].toFloatArray());
                    assertArrayEquals(new float[] {0, 1, 4}, outs[1].toFloatArray());
                }
            }
        }
    }

    @Test
    void autogradOfASmallFunction() {
        NDArray x = NDArray.of(new double[] {1, 2, 3}, 3);
        NDArray grad = x.attachGrad();
        NDArray y;
        try (Deft.Scope rec = Autograd.record()) {
            NDArray cube = x.call("elemwise_mul", new NDArray[] {x}).call("elemwise_mul",
                                                                             new NDArray[] {x});
            y = cube.call("sum", new NDArray[0]);
        }
        Deft.backward(y);
        assertArrayEquals(new double[] {3, 12, 27}, grad.toDoubleArray());
    }

    @Test
    void errorsCarryTheCMessage() {
        DeftException e = assertThrows(DeftException.class,
                                       () -> NDArray.of(new float[0], 2, -3));
        assertEquals(DeftException.Kind.VALUE, e.kind());
        assertTrue(e.getMessage().contains("shape[1] is -3"), e.getMessage());
        NDArray x = NDArray.of(new float[] {1, 2}, 2);
        e = assertThrows(DeftException.class, () -> x.call("sum", new NDArray[0], "axis", "5"));
        assertEquals(DeftException.Kind.INDEX, e.kind());
        e = assertThrows(DeftException.class, () -> Deft.invoke("no_such_op", new NDArray[] {x}));
        assertTrue(e.getMessage().contains("unknown operator 'no_such_op'"), e.getMessage());
        x.close();
        x.close(); // twice: nothing
        assertThrows(IllegalStateException.class, x::shape);
        assertThrows(IllegalStateException.class, () -> plus(x, "1"));
    }

    private static void settle() throws InterruptedException {
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(20); // the Cleaner's thread frees what became unreachable
        }
        Deft.waitAll();
    }

    @Test
    void droppedArraysReturnTheCountersToBaseline() throws InterruptedException {
        settle();
        long arrays = Deft.liveArrays(), bytes = Deft.liveBytes();
        try (NDArray x = NDArray.of(new float[] {1, 2, 3, 4}, 4)) {
            for (int i = 0; i < 100_000; i++) {
                NDArray y = plus(x, "1");
                if (i % 2 == 0) y.close(); // half closed, half left to the Cleaner
            }
        }
        long deadline = System.currentTimeMillis() + 20_000;
        do {
            settle();
        } while (Deft.liveArrays() != arrays && System.currentTimeMillis() < deadline);
        assertEquals(arrays, Deft.liveArrays());
        assertEquals(bytes, Deft.liveBytes());
    }

    @Test
    void cleanerFreesWhileOtherThreadsCompute() throws Exception {
        settle();
        long arrays = Deft.liveArrays();
        NDArray x = NDArray.of(new float[1024], 1024);
        List<Thread> workers = new ArrayList<>();
        for (int w = 0; w < 4; w++) {
            Thread t = new Thread(() -> {
                NDArray acc = plus(x, "0");
                for (int i = 0; i < 300; i++) {
                    acc = acc.call("elemwise_add", new NDArray[] {x}); // the old acc: Cleaner
                    if (i % 50 == 0) System.gc();
                }
                acc.toFloatArray();
            });
            workers.add(t);
            t.start();
        }
        for (Thread t : workers) t.join();
        x.close();
        long deadline = System.currentTimeMillis() + 20_000;
        do {
            settle();
        } while (Deft.liveArrays() != arrays && System.currentTimeMillis() < deadline);
        assertEquals(arrays, Deft.liveArrays());
    }

    static final class Cube implements CustomOp {
        @Override public long[] inferShape(long[][] inShapes, int[] inDTypes) { return inShapes[0]; }

        @Override public void forward(NDArray[] in, NDArray out, boolean isTrain) {
            NDArray c = in[0].call("elemwise_mul", in).call("elemwise_mul", in);
            Deft.invokeInto("_copyto", new NDArray[] {c}, new NDArray[] {out});
        }

        @Override public void backward(NDArray dy, NDArray[] in, NDArray y, NDArray[] dx) {
            NDArray three = in[0].call("elemwise_mul", in).call("_mul_scalar", new NDArray[0],
                                                               "scalar", "3");
            Deft.invokeInto("elemwise_mul", new NDArray[] {three, dy}, dx);
        }
    }

    @Test
    void customOperatorsInJava() {
        CustomOps.register("java_cube", 1, new Cube(), true);
        NDArray x = NDArray.of(new double[] {1, -2, 0.5}, 3);
        NDArray y = Deft.invoke("java_cube", new NDArray[] {x})[0];
        assertArrayEquals(new double[] {1, -8, 0.125}, y.toDoubleArray());
        NDArray grad = x.attachGrad();
        NDArray s;
        try (Deft.Scope rec = Autograd.record()) {
            s = Deft.invoke("java_cube", new NDArray[] {x})[0].call("sum", new NDArray[0]);
        }
        Deft.backward(s);
        assertArrayEquals(new double[] {3, 12, 0.75}, grad.toDoubleArray());
        CustomOps.register("java_failing", 1, new CustomOp() {
            @Override public long[] inferShape(long[][] s2, int[] d) { return s2[0]; }
            @Override public void forward(NDArray[] in, NDArray out, boolean t) {
                throw new IllegalStateException("the Java side said no");
            }
        }, false);
        NDArray z = Deft.invoke("java_failing", new NDArray[] {x})[0];
        DeftException e = assertThrows(DeftException.class, z::toDoubleArray);
        assertTrue(e.getMessage().contains("the Java side said no"), e.getMessage());
        assertThrows(DeftException.class, Deft::waitAll); // this thread's failure; z keeps it
        e = assertThrows(DeftException.class, () -> CustomOps.register("a::b", 1, new Cube(), false));
        assertTrue(e.getMessage().contains("'::'"), e.getMessage());
    }

    @Test
    void gpusAreCountedAndAMissingOneIsNamed() {
        int n = Deft.gpuCount();
        assertTrue(n >= 0);
        String ctx = "gpu(" + n + ")";
        DeftException e = assertThrows(DeftException.class,
                                       () -> Deft.invoke("_zeros", new NDArray[0], "shape", "(2,)",
                                                         "ctx", ctx));
        assertTrue(e.getMessage().contains(ctx), e.getMessage());
    }
}
