package org.deft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * What every binding reaches, with the semantics of Go's and Rust's tests: autograd modes
 * and gradients, CachedOp flags, the profiler, DLPack and device selection. (Deferred
 * compute and custom operators: DeftTest.)
 */
class ParityTest {
    private static NDArray plus(NDArray x, double s) {
        return Nd.internalPlusScalar(x, new Nd.InternalPlusScalarOpts().scalar(s));
    }

    private static long zeros(NDArray y) {
        long n = 0;
        for (float v : y.toFloatArray()) n += v == 0 ? 1 : 0;
        return n;
    }

    @Test
    void noGradAndTrainPredictModes() {
        NDArray x = NDArray.of(new float[] {1, 2}, 2);
        x.attachGrad();
        assertFalse(Autograd.isRecording());
        boolean trainingBefore = Autograd.isTraining();
        NDArray unrecorded, recorded;
        try (Deft.Scope rec = Autograd.record()) {
            assertTrue(Autograd.isRecording());
            assertTrue(Autograd.isTraining(), "record() trains, as MXNet's");
            try (Deft.Scope off = Autograd.pause()) {
                assertFalse(Autograd.isRecording());
                assertFalse(Autograd.isTraining(), "pause() predicts, as Python's");
                unrecorded = Nd.elemwiseMul(x, x);
            }
            assertTrue(Autograd.isRecording(), "closing the pause puts recording back");
            assertTrue(Autograd.isTraining(), "and training");
            recorded = Nd.elemwiseMul(x, x);
        }
        assertFalse(Autograd.isRecording());
        assertEquals(trainingBefore, Autograd.isTraining());
        // Not recorded: nothing to differentiate.
        assertThrows(DeftException.class, () -> Deft.backward(unrecorded));
        Deft.backward(recorded);

        NDArray ones = Nd.onesLike(NDArray.of(new float[1000], 1000));
        boolean training = Autograd.isTraining();
        try (Deft.Scope predict = Autograd.predictMode()) {
            assertFalse(Autograd.isTraining());
            assertEquals(0, zeros(Nd.dropout(ones)));
            try (Deft.Scope train = Autograd.trainMode()) {
                assertTrue(Autograd.isTraining());
                assertTrue(zeros(Nd.dropout(ones)) > 100, "dropout drops in training mode");
            }
            assertFalse(Autograd.isTraining(), "closing train mode puts predict mode back");
        }
        assertEquals(training, Autograd.isTraining());
    }

    @Test
    void gradReturnsNewArraysAndBackwardWritesTheVariables() {
        NDArray x = NDArray.of(new double[] {1, 2, 3}, 3);
        NDArray xg = NDArray.of(new double[] {7, 7, 7}, 3);
        Autograd.markVariables(new NDArray[] {x}, new Autograd.GradReq[] {Autograd.GradReq.ADD},
                               new NDArray[] {xg});
        NDArray y;
        try (Deft.Scope rec = Autograd.record()) {
            y = Nd.sum(Nd.elemwiseMul(Nd.elemwiseMul(x, x), x));
        }
        NDArray[] dx = Autograd.grad(new NDArray[] {y}, new NDArray[] {x}, true, false);
        assertArrayEquals(new double[] {3, 12, 27}, dx[0].toDoubleArray());
        assertArrayEquals(new double[] {7, 7, 7}, xg.toDoubleArray(), "grad leaves them alone");
        // ADD accumulates; the graph was retained, so it can be differentiated again
        Autograd.backward(new NDArray[] {y}, null, true, false);
        NDArray two = plus(Nd.zerosLike(y), 2); // a head gradient of y's shape
        Autograd.backward(new NDArray[] {y}, new NDArray[] {two}, false, false);
        assertArrayEquals(new double[] {7 + 9, 7 + 36, 7 + 81}, xg.toDoubleArray());
        // released now
        assertThrows(DeftException.class, () -> Autograd.backward(new NDArray[] {y}, null, false,
                                                                  false));
        assertThrows(IllegalArgumentException.class,
                     () -> Autograd.markVariables(new NDArray[] {x}, new Autograd.GradReq[0],
                                                  new NDArray[] {xg}));
    }

    @Test
    void secondDerivativesThroughCreateGraph() {
        NDArray x = NDArray.of(new double[] {1, 2}, 2);
        NDArray g = x.attachGrad();
        NDArray dx;
        try (Deft.Scope rec = Autograd.record()) {
            NDArray y = Nd.sum(Nd.elemwiseMul(Nd.elemwiseMul(x, x), x)); // sum x^3
            dx = Autograd.grad(new NDArray[] {y}, new NDArray[] {x}, false, true)[0]; // 3x^2
            dx = Nd.sum(dx);
        }
        Deft.backward(dx); // d/dx sum 3x^2 = 6x
        assertArrayEquals(new double[] {6, 12}, g.toDoubleArray());
    }

    /** y = x * x + 1 as a symbol. */
    private static Symbol squarePlusOne() {
        NDArray x = NDArray.of(new float[3], 3);
        NDArray y;
        try (Deft.Scope dc = Deft.deferredCompute()) {
            y = plus(Nd.elemwiseMul(x, x), 1);
        }
        return Deft.export(new String[] {"x"}, new NDArray[] {x}, new String[] {"y"},
                           new NDArray[] {y});
    }

    /** y = x^16 + 1 as a chain of four multiplications: intermediates a plan can share. */
    private static Symbol sixteenthPowerPlusOne() {
        NDArray x = NDArray.of(new float[3], 3);
        NDArray y;
        try (Deft.Scope dc = Deft.deferredCompute()) {
            NDArray p = x;
            for (int i = 0; i < 4; i++) p = Nd.elemwiseMul(p, p);
            y = plus(p, 1);
        }
        return Deft.export(new String[] {"x"}, new NDArray[] {x}, new String[] {"y"},
                           new NDArray[] {y});
    }

    @Test
    void cachedOpFlags() {
        Symbol chain = sixteenthPowerPlusOne();
        NDArray big = Nd.internalPlusScalar(NDArray.of(new float[1000], 1000),
                                            new Nd.InternalPlusScalarOpts().scalar(0.5));
        long[] arena = new long[3];
        CachedOp.Flag[][] variants = {{}, {CachedOp.Flag.NO_MEMORY_PLAN}, {CachedOp.Flag.FUSE}};
        for (int v = 0; v < variants.length; v++) {
            try (CachedOp op = new CachedOp(chain, variants[v])) {
                NDArray[] y = op.call(big);
                assertEquals(1, y.length);
                assertEquals(1 + Math.pow(0.5, 16), y[0].toFloatArray()[999], 0,
                             java.util.Arrays.toString(variants[v]));
                arena[v] = op.planBytes(CachedOp.PlanStat.ARENA_BYTES);
                if (v < 2) assertEquals(4 * 4000, op.planBytes(CachedOp.PlanStat.NAIVE_BYTES), 4 * 64);
            }
        }
        assertTrue(arena[0] < arena[1], "the plan shares buffers: " + arena[0] + " vs " + arena[1]);
        assertEquals(4 * 4000, arena[1], 4 * 64, "no plan: one buffer per entry");
        assertEquals(0, arena[2], "fused into one kernel: no intermediates");

        Symbol sym = squarePlusOne();
        NDArray x = NDArray.of(new float[] {1, 2, 3}, 3);
        // Forward and backward: inputs x and y's head gradient; outputs y, dy/dx.
        try (CachedOp both = new CachedOp(sym, CachedOp.Flag.BACKWARD, CachedOp.Flag.FUSE)) {
            NDArray head = NDArray.of(new float[] {1, 1, 0.5f}, 3);
            NDArray[] out = both.call(x, head);
            assertEquals(2, out.length);
            assertArrayEquals(new float[] {2, 5, 10}, out[0].toFloatArray());
            assertArrayEquals(new float[] {2, 4, 3}, out[1].toFloatArray());
        }
        try (CachedOp op = new CachedOp(sym)) {
            DeftException e = assertThrows(DeftException.class,
                                           () -> op.planBytes(CachedOp.PlanStat.ARENA_BYTES));
            assertTrue(e.getMessage().contains("run"), e.getMessage());
        }
    }

    @Test
    void profilerStatisticsDomainsAndMarkers() throws Exception {
        Path trace = Files.createTempFile("deft_java_profile", ".json");
        Profiler.config("profile_all", "true", "aggregate_stats", "true", "filename",
                        trace.toString());
        Profiler.reset();
        Profiler.start();
        try (Profiler.Domain domain = new Profiler.Domain("java_domain");
             Profiler.UserObject task = domain.object(Profiler.Kind.TASK, "java_task");
             Profiler.UserObject counter = domain.object(Profiler.Kind.COUNTER, "java_counter")) {
            task.start();
            plus(NDArray.of(new float[] {1}, 1), 1).toFloatArray();
            task.stop();
            counter.counter(5, false);
            counter.counter(2, true);
            domain.marker("java_marker", "process");
            DeftException e = assertThrows(DeftException.class, () -> domain.marker("m", "galaxy"));
            assertEquals(DeftException.Kind.VALUE, e.kind());
            assertThrows(DeftException.class, () -> task.counter(1, false), "a task is no counter");
            assertThrows(DeftException.class, task::stop, "not started");
            counter.counter(1L << 40, false); // beyond 32 bits, whole (the trace below)
            DeftException over = assertThrows(DeftException.class, () -> counter.counter(Long.MAX_VALUE, true));
            assertTrue(over.getMessage().contains("overflow"), over.getMessage());
        } finally {
            Profiler.stop();
        }
        String stats = Profiler.stats(true, true);
        assertTrue(stats.contains("_plus_scalar"), stats);
        Profiler.dump(true);
        String events = Files.readString(trace);
        Files.delete(trace);
        for (String name : new String[] {"java_task", "java_counter", "java_marker", "java_domain"})
            assertTrue(events.contains(name), name + " not in the trace:\n" + events);
        assertTrue(events.contains(String.valueOf(1L << 40)), "the counter's 2^40 not in the trace:\n" + events);
        assertThrows(DeftException.class, () -> Profiler.config("no_such_option", "1"));
        assertThrows(IllegalArgumentException.class, () -> Profiler.config("filename"));
    }

    @Test
    void dlpackOutAndIn() {
        NDArray x = NDArray.of(new float[] {1, 2, 3, 4}, 2, 2);
        DLPack.Tensor lent;
        try (NDArray y = plus(x, 1)) {
            lent = DLPack.export(y); // the array is closed at once: the tensor holds the memory
        }
        assertArrayEquals(new long[] {2, 2}, lent.shape());
        assertEquals(DType.FLOAT32, lent.dtype());
        assertEquals(Device.CPU, lent.device());
        FloatBuffer view = lent.buffer().asFloatBuffer();
        float[] read = new float[4];
        view.get(0, read);
        assertArrayEquals(new float[] {2, 3, 4, 5}, read);
        // Back in, without a copy: a write through the view is seen by the new array.
        view.put(0, 20);
        NDArray z = DLPack.toArray(lent);
        assertArrayEquals(new float[] {20, 3, 4, 5}, z.toFloatArray());
        assertThrows(IllegalStateException.class, lent::buffer, "the array took the tensor over");
        lent.close(); // nothing: taken over
        // and out again: the same memory
        try (DLPack.Tensor again = DLPack.export(z)) {
            again.buffer().asFloatBuffer().put(1, 30);
        }
        assertArrayEquals(new float[] {20, 30, 4, 5}, z.toFloatArray());
        try (NDArray i64 = Nd.cast(x, DType.INT64); DLPack.Tensor ints = DLPack.export(i64)) {
            assertEquals(DType.INT64, ints.dtype());
            assertEquals(3, ints.buffer().asLongBuffer().get(2));
        }
        z.close(); // its tensor's deleter runs (directBuffersBecomeArraysWithoutACopy checks one)
    }

    @Test
    void directBuffersBecomeArraysWithoutACopy() throws InterruptedException {
        ByteBuffer data = ByteBuffer.allocateDirect(6 * 8).order(ByteOrder.nativeOrder());
        data.asDoubleBuffer().put(new double[] {1, 2, 3, 4, 5, 6});
        NDArray a = DLPack.wrap(data, DType.FLOAT64, 2, 3);
        assertArrayEquals(new long[] {2, 3}, a.shape());
        data.putDouble(0, -1);
        assertArrayEquals(new double[] {-1, 2, 3, 4, 5, 6}, a.toDoubleArray());
        Deft.invokeInto("_copyto", new NDArray[] {NDArray.of(new double[] {0, 0, 0, 0, 0, 9}, 2, 3)},
                        new NDArray[] {a});
        Deft.waitAll();
        assertEquals(9, data.getDouble(5 * 8), "a write to the array is in the buffer");
        // The array holds the buffer: dropped here, it stays until the array is freed.
        WeakReference<ByteBuffer> held = new WeakReference<>(data);
        data = null;
        for (int i = 0; i < 3; i++) System.gc();
        assertArrayEquals(new double[] {0, 0, 0, 0, 0, 9}, a.toDoubleArray());
        a.close();
        Deft.waitAll();
        long deadline = System.currentTimeMillis() + 20_000; // a bound, not a timing
        while (held.get() != null && System.currentTimeMillis() < deadline) {
            System.gc();
            Thread.sleep(10);
        }
        assertNull(held.get(), "freeing the array lets the buffer go");

        DeftException e = assertThrows(DeftException.class,
                                       () -> DLPack.wrap(ByteBuffer.allocate(8), DType.FLOAT32, 2));
        assertTrue(e.getMessage().contains("direct"), e.getMessage());
        e = assertThrows(DeftException.class,
                         () -> DLPack.wrap(ByteBuffer.allocateDirect(8), DType.FLOAT32, 3));
        assertEquals("the shape needs 12 bytes but the buffer holds 8", e.getMessage());
        ByteBuffer odd = ByteBuffer.allocateDirect(12).position(1).slice();
        assertThrows(DeftException.class, () -> DLPack.wrap(odd, DType.FLOAT32, 2));
    }

    @Test
    void devicesAreChosenByValue() {
        assertEquals(Device.CPU, Device.parse("cpu"));
        assertEquals(Device.CPU, Device.parse("cpu(0)"));
        assertEquals(Device.gpu(1), Device.parse("gpu(1)"));
        assertEquals(Device.gpu(0), Device.parse("gpu"));
        assertEquals("gpu(3)", Device.gpu(3).toString());
        assertEquals(Device.Type.GPU, Device.gpu(3).type());
        DeftException bad = assertThrows(DeftException.class, () -> Device.parse("tpu(0)"));
        assertEquals(DeftException.Kind.PARSE, bad.kind());
        assertThrows(IllegalArgumentException.class, () -> Device.gpu(-1));

        NDArray a = Device.CPU.zeros(DType.FLOAT32, 2);
        assertEquals(Device.CPU, Device.of(a));
        assertArrayEquals(new float[] {0, 0}, a.toFloatArray());
        int n = Device.gpuCount();
        Device missing = Device.gpu(n);
        DeftException e = assertThrows(DeftException.class, () -> missing.zeros(DType.FLOAT32, 2));
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
        if (n > 0) {
            NDArray x = NDArray.of(new float[] {1, -2}, 2);
            NDArray onGpu = Device.gpu(0).copyOf(x);
            assertEquals(Device.gpu(0), Device.of(onGpu));
            NDArray back = Device.CPU.copyOf(Nd.relu(onGpu));
            assertArrayEquals(new float[] {1, 0}, back.toFloatArray());
        }
    }
}
