package org.deft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/** Loading, lifetime, the native-memory bound and the operator call path. */
class BindingCoreTest {
    @Test
    void librariesComeFromTheJarResources() {
        // surefire sets no library path: the classes' resources carry them
        assertEquals("jar", NativeLoader.source());
        assertEquals(null, System.getProperty("deft.library.path"));
    }

    private static final int N = 128;

    /** The shape: the result's last use is the read that C performs. */
    private static float[] dotThenRead(NDArray a, NDArray b) {
        NDArray y = a.call("dot", new NDArray[] {b});
        return y.toFloatArray();
    }

    @Test
    void anArrayWhoseLastUseIsANativeReadIsNotFreedDuringIt() throws Exception {
        float[] av = new float[N * N], id = new float[N * N];
        for (int i = 0; i < av.length; i++) av[i] = i % 7 + 1;
        for (int i = 0; i < N; i++) id[i * N + i] = 1;
        AtomicBoolean done = new AtomicBoolean();
        Thread collector = new Thread(() -> {
            while (!done.get()) System.gc();
        });
        Thread allocator = new Thread(() -> { // same-sized arrays reuse freed storage
            float[] junk = new float[N * N];
            java.util.Arrays.fill(junk, -1);
            while (!done.get()) NDArray.of(junk, N, N).call("_mul_scalar", new NDArray[0],
                                                            "scalar", "3");
        });
        int wrong = 0;
        try (NDArray a = NDArray.of(av, N, N); NDArray b = NDArray.of(id, N, N)) {
            collector.start();
            allocator.start();
            for (int i = 0; i < 1000; i++)
                if (!java.util.Arrays.equals(av, dotThenRead(a, b))) wrong++;
        } finally {
            done.set(true);
            collector.join();
            allocator.join();
        }
        assertEquals(0, wrong, "reads of freed arrays");
    }

    @Test
    void invokeReturnsEveryOutputPastSixteen() {
        float[] v = new float[40];
        for (int i = 0; i < v.length; i++) v[i] = i;
        try (NDArray x = NDArray.of(v, 40)) {
            for (int n : new int[] {20, 40, 2}) { // past the first call's room, then under it
                NDArray[] parts = Deft.invoke("split", new NDArray[] {x}, "axis", "0", "num_outputs",
                                              Integer.toString(n));
                assertEquals(n, parts.length);
                assertArrayEquals(new float[] {v.length / n * (n - 1)},
                                  java.util.Arrays.copyOf(parts[n - 1].toFloatArray(), 1));
                for (NDArray p : parts) p.close();
            }
        }
    }

    @Test
    void invokeIntoFillsNullOutputsAndRefusesTooFew() {
        try (NDArray x = NDArray.of(new float[] {1, 2, 3, 4}, 4)) {
            NDArray[] outs = new NDArray[2];
            Deft.invokeInto("split", new NDArray[] {x}, outs, "axis", "0", "num_outputs", "2");
            assertArrayEquals(new float[] {3, 4}, outs[1].toFloatArray());
            DeftException e = assertThrows(DeftException.class, () -> Deft.invokeInto(
                "split", new NDArray[] {x}, new NDArray[1], "axis", "0", "num_outputs", "4"));
            assertEquals(DeftException.Kind.VALUE, e.kind());
            assertTrue(e.getMessage().contains("makes 4 outputs"), e.getMessage());
            for (NDArray o : outs) o.close();
        }
    }

    @Test
    void badCallsThrowAndNeverCrash() {
        try (NDArray x = NDArray.of(new float[] {1, 2}, 2)) {
            DeftException e = assertThrows(DeftException.class,
                                           () -> Deft.invoke("no_such_op", new NDArray[] {x}));
            assertEquals(DeftException.Kind.VALUE, e.kind());
            assertTrue(e.getMessage().contains("no_such_op"), e.getMessage());
            e = assertThrows(DeftException.class,
                             () -> x.call("_plus_scalar", new NDArray[0], "scalar", "one"));
            assertNotEquals(DeftException.Kind.NONE, e.kind());
            assertTrue(e.getMessage().contains("scalar"), e.getMessage());
            e = assertThrows(DeftException.class,
                             () -> x.call("_plus_scalar", new NDArray[0], "no_such", "1"));
            assertTrue(e.getMessage().contains("no_such"), e.getMessage());
            e = assertThrows(DeftException.class, () -> Deft.invoke("elemwise_add",
                                                                   new NDArray[] {x}));
            assertNotEquals(DeftException.Kind.NONE, e.kind());
            assertThrows(IllegalArgumentException.class,
                         () -> x.call("_plus_scalar", new NDArray[0], "scalar"));
            assertThrows(NullPointerException.class,
                         () -> x.call("_plus_scalar", new NDArray[0], "scalar", null));
            e = assertThrows(DeftException.class, () -> Deft.invoke("_plus_scalar",
                                                                   new NDArray[] {null}));
            assertNotEquals(DeftException.Kind.NONE, e.kind());
            String big = "x".repeat(2000); // past the JNI glue's inline room for text
            e = assertThrows(DeftException.class,
                             () -> x.call("_plus_scalar", new NDArray[0], "scalar", big));
            assertTrue(e.getMessage().contains("scalar"), e.getMessage());
            String[] many = new String[60]; // past its inline room for parameter words
            for (int i = 0; i < many.length; i += 2) {
                many[i] = "p" + i;
                many[i + 1] = "1";
            }
            e = assertThrows(DeftException.class, () -> x.call("_plus_scalar", new NDArray[0], many));
            assertTrue(e.getMessage().contains("p0"), e.getMessage());
            e = assertThrows(DeftException.class, // beyond ASCII: sent as UTF-8
                             () -> x.call("_plus_scalar", new NDArray[0], "scal\u00e4r", "1"));
            assertTrue(e.getMessage().contains("scal\u00e4r"), e.getMessage());
            NDArray[] inputs = new NDArray[200]; // past C's input limit: its error, no crash
            java.util.Arrays.fill(inputs, x);
            assertThrows(DeftException.class, () -> Deft.invoke("add_n", inputs));
        }
    }

    /** The peak of deft's live bytes over a loop that drops 64 KiB arrays unclosed. */
    private static long peakOfDroppingLoop() {
        long peak = 0;
        try (NDArray x = NDArray.of(new float[16384], 16384)) {
            for (int i = 0; i < 4000; i++) {
                x.call("_plus_scalar", new NDArray[0], "scalar", "1"); // dropped
                peak = Math.max(peak, Deft.liveBytes());
            }
        }
        return peak;
    }

    private static void settle() throws InterruptedException {
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(20);
        }
        Deft.waitAll();
    }

    @Test
    void theBoundKeepsDroppedArraysUnder64MB() throws InterruptedException {
        long prev = Deft.setNativeGCThreshold(32L << 20);
        try {
            settle();
            long runs = Deft.nativeGCRuns();
            long peak = peakOfDroppingLoop(); // 4000 x 64 KiB = 250 MiB dropped
            assertTrue(peak < 64L << 20, "peak " + peak + " bytes with the bound on");
            assertTrue(Deft.nativeGCRuns() > runs, "the bound ran no collection");

            Deft.setNativeGCThreshold(0); // off: the same loop goes past 64 MB
            settle(); // an empty young generation: the loop's small objects do not fill it
            runs = Deft.nativeGCRuns();
            peak = peakOfDroppingLoop();
            assertEquals(runs, Deft.nativeGCRuns());
            assertTrue(peak >= 64L << 20, "peak " + peak + " bytes with the bound off");
        } finally {
            Deft.setNativeGCThreshold(prev);
            settle();
        }
    }

    @Test
    void theThresholdComesFromTheEnvironment() {
        // surefire sets DEFT_JAVA_GC_BYTES (pom.xml)
        assertEquals(Long.parseLong(System.getenv("DEFT_JAVA_GC_BYTES")), NativeMemory.INITIAL);
        assertEquals(1000, NativeMemory.parseThreshold("1000"));
        assertEquals(0, NativeMemory.parseThreshold("0"));
        assertEquals(NativeMemory.DEFAULT_THRESHOLD, NativeMemory.parseThreshold(null));
        assertEquals(NativeMemory.DEFAULT_THRESHOLD, NativeMemory.parseThreshold("-5"));
        assertEquals(NativeMemory.DEFAULT_THRESHOLD, NativeMemory.parseThreshold("lots"));
        long prev = Deft.setNativeGCThreshold(12345);
        assertEquals(12345, Deft.setNativeGCThreshold(prev));
    }
}
