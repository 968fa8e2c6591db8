package org.deft;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.junit.jupiter.api.Test;

/** The generated operator methods (Nd.java): current with the registry, and typed right. */
class NdTest {
    /**
     * Nd.java is what the generator makes from the registry now: a new or changed operator
     * fails this test until it is regenerated ({@link NdGenerator#REGENERATE}, which runs this
     * test with -Ddeft.regenerate=true: it then writes the file instead).
     */
    @Test
    void generatedFileIsCurrent() throws Exception {
        String fresh = NdGenerator.generate();
        if (Boolean.getBoolean("deft.regenerate")) {
            Files.write(NdGenerator.FILE, fresh.getBytes(StandardCharsets.UTF_8));
            return;
        }
        String committed = new String(Files.readAllBytes(NdGenerator.FILE), StandardCharsets.UTF_8);
        if (!committed.equals(fresh))
            fail(NdGenerator.FILE + " is stale (" + NdGenerator.firstDifference(committed, fresh)
                 + "); regenerate it in bindings/java with\n  " + NdGenerator.REGENERATE
                 + "\nand commit the result");
    }

    @Test
    void namesFollowTheDocumentedRules() {
        assertEquals("broadcastAdd", NdGenerator.method("broadcast_add"));
        assertEquals("internalPlusScalar", NdGenerator.method("_plus_scalar"));
        assertEquals("internalNpDot", NdGenerator.method("_np_dot"));
        assertEquals("fullyConnected", NdGenerator.method("FullyConnected"));
        assertEquals("switch_", NdGenerator.method("switch"));
        assertEquals("x2d", NdGenerator.method("2d"));
        assertEquals("default_", NdGenerator.variable("default"));
        assertEquals("opts_", NdGenerator.variable("opts"));
        assertEquals("numOutputs", NdGenerator.variable("num_outputs"));
        // case-folded collisions: aliases share a method; otherwise lower case keeps the name
        java.util.Map<String, NdGenerator.Op> m = NdGenerator.methods(java.util.List.of(
            op("Softmax", "SoftmaxOutput"), op("softmax", "softmax"), op("Concat", "Concat"),
            op("concat", "Concat"), op("wait", "wait")));
        assertEquals(java.util.Set.of("softmax", "softmaxOp", "concat", "waitOp"), m.keySet());
        assertEquals("softmax", m.get("softmax").name());
        assertEquals("Softmax", m.get("softmaxOp").name());
        assertEquals("Concat", m.get("concat").canonical());
    }

    private static NdGenerator.Op op(String name, String canonical) {
        return new NdGenerator.Op(name, canonical, "", 1, 1, new String[] {"data"},
                                  java.util.List.of(), 1);
    }

    @Test
    void javadocTextIsEscaped() {
        assertEquals("a &lt;b&gt; &amp; &#64;c *&#47; &#123;&#64;code x&#125;",
                     NdGenerator.doc("a <b> & @c */ {@code x}"));
    }

    @Test
    void typedParametersReachTheOperators() {
        NDArray x = NDArray.of(new float[] {-1, 2, -3, 4, 5, -6}, 2, 3);
        assertArrayEquals(new float[] {0, 2, 0, 4, 5, 0}, Nd.relu(x).toFloatArray());
        NDArray[] parts = Nd.split(x, 3, new Nd.SplitOpts().axis(1));
        assertEquals(3, parts.length);
        assertArrayEquals(new float[] {-3, -6}, parts[2].toFloatArray());
        NDArray s = Nd.sum(x, new Nd.SumOpts().axis(1).keepdims(true));
        assertArrayEquals(new long[] {2, 1}, s.shape());
        assertArrayEquals(new float[] {-2, 3}, s.toFloatArray());
        assertArrayEquals(new float[] {1}, Nd.sum(x).toFloatArray());
        assertArrayEquals(new int[] {-1, 2, -3, 4, 5, -6}, Nd.cast(x, DType.INT32).toIntArray());
        NDArray c = Nd.concat(new NDArray[] {x, x, x}, new Nd.ConcatOpts().dim(0));
        assertArrayEquals(new long[] {6, 3}, c.shape());
        assertArrayEquals(new long[] {2, 9}, Nd.concat(x, x, x).shape()); // varargs, dim 1
        NDArray one = Nd.internalPlusScalar(x, new Nd.InternalPlusScalarOpts().scalar(1.5));
        assertArrayEquals(new float[] {0.5f, 3.5f, -1.5f, 5.5f, 6.5f, -4.5f}, one.toFloatArray());
        NDArray z = Nd.internalZeros(new Nd.InternalZerosOpts().shape(2).dtype(DType.INT64)
                                         .ctx(Device.CPU));
        assertArrayEquals(new long[] {0, 0}, z.toLongArray());
        // a required parameter that takes None: null
        assertArrayEquals(new float[] {2, -3, 5, -6}, Nd.sliceAxis(x, 1, 1, null).toFloatArray());
        assertArrayEquals(new float[] {2, 5}, Nd.sliceAxis(x, 1, 1, 2L).toFloatArray());
        assertArrayEquals(new float[] {0, 2, 0, 4, 5, 0}, Nd.activation(x, "relu").toFloatArray());
    }

    @Test
    void optionalInputsArePositional() {
        NDArray x = NDArray.of(new float[] {-1, 2, -3, 4, 5, -6}, 2, 3);
        NDArray w = NDArray.of(new float[] {1, 1, 1}, 1, 3);
        NDArray b = NDArray.of(new float[] {10}, 1);
        NDArray withBias = Nd.fullyConnected(x, w, 1, new Nd.FullyConnectedOpts().bias(b));
        NDArray noBias = Nd.fullyConnected(x, w, 1, new Nd.FullyConnectedOpts().noBias(true));
        assertArrayEquals(new float[] {8, 13}, withBias.toFloatArray());
        assertArrayEquals(new float[] {-2, 3}, noBias.toFloatArray());
        // BatchNorm-like positional inputs: a later optional input without an earlier one
        DeftException e = assertThrows(DeftException.class, () -> new OpArgs(1, 0).input(x)
            .optionalInputs("op", null, b));
        assertEquals(DeftException.Kind.VALUE, e.kind());
        assertEquals("op: optional input 2 is given but input 1 is not", e.getMessage());
    }

    @Test
    void badValuesAreTheLibrarysErrors() {
        NDArray x = NDArray.of(new float[] {1, 2, 3, 4, 5, 6}, 2, 3);
        DeftException e = assertThrows(DeftException.class,
                                       () -> Nd.split(x, 4, new Nd.SplitOpts().axis(1)));
        assertEquals(DeftException.Kind.VALUE, e.kind());
        e = assertThrows(DeftException.class, () -> Nd.activation(x, "no_such_activation"));
        assertTrue(e.getMessage().contains("no_such_activation"), e.getMessage());
    }

    @Test
    void parametersAreWrittenAsTheRegistryParsesThem() {
        NDArray x = NDArray.of(new double[] {1}, 1);
        // whole doubles as integers, others exactly, tuples with a trailing comma for one
        assertArrayEquals(new double[] {1 + 1e-10},
                          Nd.internalPlusScalar(x, new Nd.InternalPlusScalarOpts().scalar(1e-10))
                              .toDoubleArray());
        assertArrayEquals(new double[] {3e20},
                          Nd.internalPlusScalar(x, new Nd.InternalPlusScalarOpts().scalar(3e20))
                              .toDoubleArray(), 1e5);
        NDArray t = NDArray.of(new float[24], 2, 3, 4);
        assertArrayEquals(new long[] {2, 1, 1},
                          Nd.sum(t, new Nd.SumOpts().axis(1, 2).keepdims(true)).shape());
        assertArrayEquals(new long[] {3, 4}, Nd.sum(t, new Nd.SumOpts().axis(0)).shape());
    }
}
