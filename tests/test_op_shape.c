/* Shape and index operators against explicit expected arrays and index arithmetic. */
#include "op_helpers.h"

static double iota24[24];

static DeftNDArrayHandle make_iota(int dtype, int ndim, const int64_t *shape) {
    for (int i = 0; i < 24; i++) iota24[i] = i;
    return make(dtype, ndim, shape, iota24);
}

START_TEST(test_reshape_special_values_and_errors) {
    DeftNDArrayHandle x = make_iota(DEFT_INT32, 3, SHAPE(2, 3, 4));
    DeftNDArrayHandle a = call1("Reshape", 1, &x, P("shape", "(0,-1)"));
    assert_shape(a, 2, SHAPE(2, 12));
    assert_values(a, 24, iota24, 0);
    DeftNDArrayHandle b = call1("Reshape", 1, &x, P("shape", "(0,-2)"));
    assert_shape(b, 3, SHAPE(2, 3, 4));
    DeftNDArrayHandle c = call1("Reshape", 1, &x, P("shape", "(-1,)"));
    assert_shape(c, 1, SHAPE(24));
    DeftNDArrayHandle f = call1("Flatten", 1, &x, NO_PARAMS);
    assert_shape(f, 2, SHAPE(2, 12));
    ck_assert_call_fails("Reshape", 1, &x, P("shape", "(5,-1)"), DEFT_ERROR_VALUE,
                         "cannot infer the -1 in shape: 24 elements");
    ck_assert_call_fails("Reshape", 1, &x, P("shape", "(5,5)"), DEFT_ERROR_VALUE,
                         "cannot reshape (2,3,4) (24 elements) to (5,5)");
    ck_assert_call_fails("Reshape", 1, &x, P("shape", "(-1,-1)"), DEFT_ERROR_VALUE,
                         "more than one -1");
    ck_assert_call_fails("Reshape", 1, &x, P("shape", "(-7,)"), DEFT_ERROR_VALUE, "shape[0] is -7");
    ck_assert_call_fails("Reshape", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "required parameter 'shape' is missing");
    free_all(5, (DeftNDArrayHandle[]){x, a, b, c, f});
}
END_TEST

/* _np_reshape is NumPy's reshape: 0 is a dimension of size 0, not MXNet's "copy". */
START_TEST(test_np_reshape_takes_the_shape_literally) {
    DeftNDArrayHandle x = make_iota(DEFT_INT32, 3, SHAPE(2, 3, 4));
    DeftNDArrayHandle a = call1("_np_reshape", 1, &x, P("newshape", "(4,-1)"));
    assert_shape(a, 2, SHAPE(4, 6));
    assert_values(a, 24, iota24, 0);
    DeftNDArrayHandle b = call1("_np_reshape", 1, &x, P("newshape", "(24,)", "order", "C"));
    assert_shape(b, 1, SHAPE(24));
    /* zero-size arrays: 0 is a size, -1 is inferred from the other sizes */
    DeftNDArrayHandle z = make(DEFT_FLOAT32, 2, SHAPE(2, 0), NULL);
    DeftNDArrayHandle z1 = call1("_np_reshape", 1, &z, P("newshape", "(0,)"));
    assert_shape(z1, 1, SHAPE(0));
    /* as in NumPy, a -1 next to a 0 could be anything */
    ck_assert_call_fails("_np_reshape", 1, &z, P("newshape", "(0,5,-1)"), DEFT_ERROR_VALUE,
                         "cannot infer the -1 in newshape: 0 elements");
    DeftNDArrayHandle z3 = call1("_np_reshape", 1, &z, P("newshape", "(-1,7)"));
    assert_shape(z3, 2, SHAPE(0, 7));
    DeftNDArrayHandle z4 = call1("_np_reshape", 1, &z, P("newshape", "(3,0,2)"));
    assert_shape(z4, 3, SHAPE(3, 0, 2));
    /* the same text means "copy" to the MXNet operator */
    DeftNDArrayHandle m = call1("Reshape", 1, &x, P("shape", "(0,-1)"));
    assert_shape(m, 2, SHAPE(2, 12));
    ck_assert_call_fails("_np_reshape", 1, &x, P("newshape", "(0,-1)"), DEFT_ERROR_VALUE,
                         "cannot infer the -1 in newshape: 24 elements");
    ck_assert_call_fails("_np_reshape", 1, &x, P("newshape", "(2,-2)"), DEFT_ERROR_VALUE,
                         "newshape[1] is -2, expected >= 0 or -1");
    ck_assert_call_fails("_np_reshape", 1, &x, P("newshape", "(-1,-1)"), DEFT_ERROR_VALUE,
                         "newshape has more than one -1");
    ck_assert_call_fails("_np_reshape", 1, &x, P("newshape", "(5,5)"), DEFT_ERROR_VALUE,
                         "cannot reshape (2,3,4) (24 elements) to (5,5)");
    ck_assert_call_fails("_np_reshape", 1, &x, P("newshape", "(24,)", "order", "F"),
                         DEFT_ERROR_PARSE, "parameter 'order' is 'F', expected one of: C");
    free_all(7, (DeftNDArrayHandle[]){x, a, b, z, z1, z3, z4});
    free_all(1, &m);
}
END_TEST

/* The gradient of _np_reshape is the output gradient in the input's shape. */
START_TEST(test_np_reshape_gradient_has_the_input_shape) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 2, SHAPE(2, 3), VALUES(1, 2, 3, 4, 5, 6));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 2, SHAPE(2, 3), NULL);
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle y = call1("_np_reshape", 1, &x, P("newshape", "(3,1,-1)"));
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    assert_shape(y, 3, SHAPE(3, 1, 2));
    DeftNDArrayHandle head = make(DEFT_FLOAT64, 3, SHAPE(3, 1, 2), VALUES(10, 20, 30, 40, 50, 60));
    ck_assert_ok(DeftAutogradBackward(1, &y, &head, 0, 0));
    assert_shape(g, 2, SHAPE(2, 3));
    assert_values(g, 6, VALUES(10, 20, 30, 40, 50, 60), 0);
    free_all(4, (DeftNDArrayHandle[]){x, g, y, head});
}
END_TEST

/* BlockGrad passes values and stops gradients: d/dx (x * BlockGrad(x)) = x. */
START_TEST(test_block_grad_stops_the_gradient) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, -2, 0.5));
    DeftNDArrayHandle g = make(DEFT_FLOAT64, 1, SHAPE(3), NULL);
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, NULL, &g));
    ck_assert_ok(DeftAutogradSetIsRecording(1, NULL));
    DeftNDArrayHandle c = call1("BlockGrad", 1, &x, NO_PARAMS);
    DeftNDArrayHandle y = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, c}, NO_PARAMS);
    ck_assert_ok(DeftAutogradSetIsRecording(0, NULL));
    assert_values(c, 3, VALUES(1, -2, 0.5), 0);
    ck_assert_ok(DeftAutogradBackward(1, &y, NULL, 0, 0));
    assert_values(g, 3, VALUES(1, -2, 0.5), 0);
    free_all(4, (DeftNDArrayHandle[]){x, g, c, y});
}
END_TEST

/* A device parameter naming cpu(1) is an error, not a silent cpu(0). */
START_TEST(test_device_parameters_refuse_cpu_n) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 2));
    ck_assert_call_fails("_copy_to_device", 1, &x, P("device", "cpu(1)"), DEFT_ERROR_VALUE,
                         "the device of '_copy_to_device' is cpu(1), expected cpu(0): the devices "
                         "are cpu(0) and ");
    ck_assert_call_fails("_full", 0, NULL, P("shape", "(2,)", "value", "1", "ctx", "cpu(2)"),
                         DEFT_ERROR_VALUE, "the device of '_full' is cpu(2), expected cpu(0)");
    DeftNDArrayHandle y = call1("_copy_to_device", 1, &x, P("device", "cpu(0)"));
    assert_values(y, 2, VALUES(1, 2), 0);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

/* Copies move elements by size: run over 1-, 4- and 8-byte dtypes. */
static const int copy_dtypes[] = {DEFT_UINT8, DEFT_INT32, DEFT_FLOAT32, DEFT_FLOAT64, DEFT_INT64};

START_TEST(test_transpose_matches_index_arithmetic) {
    DeftNDArrayHandle x = make_iota(copy_dtypes[_i], 3, SHAPE(2, 3, 4));
    const char *perms[] = {"()", "(1,0,2)", "(2,0,1)", "(0,2,1)", "(-1,0,1)"};
    const int axes[5][3] = {{2, 1, 0}, {1, 0, 2}, {2, 0, 1}, {0, 2, 1}, {2, 0, 1}};
    const int64_t dims[3] = {2, 3, 4}, strides[3] = {12, 4, 1};
    for (int p = 0; p < 5; p++) {
        DeftNDArrayHandle y = call1("transpose", 1, &x, P("axes", perms[p]));
        int64_t od[3] = {dims[axes[p][0]], dims[axes[p][1]], dims[axes[p][2]]};
        assert_shape(y, 3, od);
        double want[24];
        for (int64_t i = 0; i < od[0]; i++)
            for (int64_t j = 0; j < od[1]; j++)
                for (int64_t k = 0; k < od[2]; k++)
                    want[(i * od[1] + j) * od[2] + k] =
                        (double)(i * strides[axes[p][0]] + j * strides[axes[p][1]] +
                                 k * strides[axes[p][2]]);
        assert_values(y, 24, want, 0);
        ck_assert_ok(DeftNDArrayFree(y));
    }
    ck_assert_call_fails("transpose", 1, &x, P("axes", "(0,1)"), DEFT_ERROR_VALUE,
                         "axes has 2 entries, expected 3");
    ck_assert_call_fails("transpose", 1, &x, P("axes", "(0,1,1)"), DEFT_ERROR_VALUE,
                         "axes repeats axis 1");
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

START_TEST(test_expand_dims_and_squeeze) {
    DeftNDArrayHandle x = make_iota(DEFT_FLOAT32, 2, SHAPE(3, 1));
    DeftNDArrayHandle e0 = call1("expand_dims", 1, &x, P("axis", "0"));
    assert_shape(e0, 3, SHAPE(1, 3, 1));
    DeftNDArrayHandle e2 = call1("expand_dims", 1, &x, P("axis", "-1"));
    assert_shape(e2, 3, SHAPE(3, 1, 1));
    assert_values(e2, 3, VALUES(0, 1, 2), 0);
    DeftNDArrayHandle s = call1("squeeze", 1, &e0, NO_PARAMS);
    assert_shape(s, 1, SHAPE(3));
    DeftNDArrayHandle s1 = call1("squeeze", 1, &e0, P("axis", "(2,)"));
    assert_shape(s1, 2, SHAPE(1, 3));
    ck_assert_call_fails("squeeze", 1, &e0, P("axis", "1"), DEFT_ERROR_VALUE,
                         "axis 1 has size 3, expected 1");
    ck_assert_call_fails("expand_dims", 1, &x, P("axis", "3"), DEFT_ERROR_INDEX,
                         "axis is 3, expected an axis in [-3, 3)");
    free_all(5, (DeftNDArrayHandle[]){x, e0, e2, s, s1});
}
END_TEST

START_TEST(test_slice_like_python) {
    DeftNDArrayHandle x = make_iota(DEFT_INT64, 2, SHAPE(4, 6));
    DeftNDArrayHandle a =
        call1("slice", 1, &x, P("begin", "(1,0)", "end", "(3,6)", "step", "(1,2)"));
    assert_shape(a, 2, SHAPE(2, 3));
    assert_values(a, 6, VALUES(6, 8, 10, 12, 14, 16), 0);
    DeftNDArrayHandle b =
        call1("slice", 1, &x, P("begin", "(None,-1)", "end", "(None,None)", "step", "(-1,-2)"));
    assert_shape(b, 2, SHAPE(4, 3));
    assert_values(b, 12, VALUES(23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1), 0);
    DeftNDArrayHandle c = call1("slice", 1, &x, P("begin", "(-100,)", "end", "(100,)"));
    assert_shape(c, 2, SHAPE(4, 6));
    DeftNDArrayHandle d = call1("slice", 1, &x, P("begin", "(3,)", "end", "(1,)"));
    assert_shape(d, 2, SHAPE(0, 6));
    DeftNDArrayHandle e = call1("slice_axis", 1, &x, P("axis", "1", "begin", "-2", "end", "None"));
    assert_shape(e, 2, SHAPE(4, 2));
    assert_values(e, 8, VALUES(4, 5, 10, 11, 16, 17, 22, 23), 0);
    ck_assert_call_fails("slice", 1, &x, P("begin", "(0,0)", "end", "(1,1)", "step", "(0,1)"),
                         DEFT_ERROR_VALUE, "step[0] is 0");
    ck_assert_call_fails("slice", 1, &x, P("begin", "(0,0,0)", "end", "(1,1,1)"), DEFT_ERROR_VALUE,
                         "begin, end and step have 3, 3 and 0 entries");
    free_all(6, (DeftNDArrayHandle[]){x, a, b, c, d, e});
}
END_TEST

/* Steps as large as int64 holds take one element, as Python's do: no
 * overflow in the length or in the strides (found by fuzz_invoke). */
START_TEST(test_slice_with_huge_steps) {
    DeftNDArrayHandle x = make_iota(DEFT_FLOAT32, 3, SHAPE(1, 5, 1));
    const char *steps[] = {"(1,2305843009213693953,1)", "(1,9223372036854775807,1)",
                           "(1,-9223372036854775807,1)", "(1,-2305843009213693953,1)"};
    const double first[] = {0, 0, 4, 4};
    for (int i = 0; i < 4; i++) {
        DeftNDArrayHandle s =
            call1("slice", 1, &x,
                  P("begin", "(None,None,None)", "end", "(None,None,None)", "step", steps[i]));
        assert_shape(s, 3, SHAPE(1, 1, 1));
        assert_values(s, 1, &first[i], 0);
        DeftNDArrayHandle grad_in[2] = {s, x};
        DeftNDArrayHandle g =
            call1("_backward_slice", 2, grad_in,
                  P("begin", "(None,None,None)", "end", "(None,None,None)", "step", steps[i]));
        assert_shape(g, 3, SHAPE(1, 5, 1));
        free_all(2, (DeftNDArrayHandle[]){s, g});
    }
    free_all(1, &x);
}
END_TEST

START_TEST(test_slice_assign_in_place_and_broadcast) {
    DeftNDArrayHandle x = make_iota(DEFT_INT64, 2, SHAPE(3, 4));
    DeftNDArrayHandle row = make_iota(DEFT_INT64, 1, SHAPE(2));
    set_values(row, 2, VALUES(-1, -2));
    /* a new array: x itself is untouched */
    DeftNDArrayHandle in[2] = {x, row};
    DeftNDArrayHandle y =
        call1("_slice_assign", 2, in, P("begin", "(0,1)", "end", "(None,None)", "step", "(2,2)"));
    assert_values(y, 12, VALUES(0, -1, 2, -2, 4, 5, 6, 7, 8, -1, 10, -2), 0);
    assert_values(x, 12, VALUES(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), 0);
    /* x as the output: written in place */
    DeftNDArrayHandle out[1] = {x};
    int nout = 1;
    ck_assert_ok(call("_slice_assign", 2, in, &nout, out,
                      P("begin", "(1,0)", "end", "(2,None)", "step", "(1,2)")));
    assert_values(x, 12, VALUES(0, 1, 2, 3, -1, 5, -2, 7, 8, 9, 10, 11), 0);
    DeftNDArrayHandle z = make_iota(DEFT_INT64, 2, SHAPE(3, 4));
    DeftNDArrayHandle zz[2] = {z, z};
    ck_assert_call_fails("_slice_assign", 2, zz, P("begin", "(0,)", "end", "(2,)"),
                         DEFT_ERROR_VALUE, "does not fit a region of (2,4)");
    DeftNDArrayHandle f = make(DEFT_FLOAT32, 1, SHAPE(4), NULL);
    DeftNDArrayHandle mixed[2] = {x, f};
    ck_assert_call_fails("_slice_assign", 2, mixed, P("begin", "(0,)", "end", "(1,)"),
                         DEFT_ERROR_TYPE, "value is float32, expected int64");
    free_all(5, (DeftNDArrayHandle[]){x, row, y, z, f});
}
END_TEST

START_TEST(test_concat_stack_split_roundtrip) {
    int dtype = copy_dtypes[_i];
    bool is_unsigned = dtype == DEFT_UINT8;
    DeftNDArrayHandle a = make_iota(dtype, 2, SHAPE(2, 3));
    DeftNDArrayHandle b =
        make(dtype, 2, SHAPE(2, 2), is_unsigned ? VALUES(11, 12, 13, 14) : VALUES(-1, -2, -3, -4));
    DeftNDArrayHandle cat = call1("Concat", 2, (DeftNDArrayHandle[]){a, b}, P("dim", "1"));
    assert_shape(cat, 2, SHAPE(2, 5));
    assert_values(cat, 10,
                  is_unsigned ? VALUES(0, 1, 2, 11, 12, 3, 4, 5, 13, 14)
                              : VALUES(0, 1, 2, -1, -2, 3, 4, 5, -3, -4),
                  0);
    DeftNDArrayHandle cat0 =
        call1("Concat", 3, (DeftNDArrayHandle[]){a, a, a}, P("dim", "0", "num_args", "3"));
    assert_shape(cat0, 2, SHAPE(6, 3));
    DeftNDArrayHandle st = call1("stack", 2, (DeftNDArrayHandle[]){a, a}, P("axis", "2"));
    assert_shape(st, 3, SHAPE(2, 3, 2));
    assert_values(st, 12, VALUES(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5), 0);
    DeftNDArrayHandle parts[3] = {NULL, NULL, NULL};
    int nout = 3;
    ck_assert_ok(call("split", 1, &cat0, &nout, parts, P("num_outputs", "3", "axis", "0")));
    ck_assert_int_eq(nout, 3);
    for (int k = 0; k < 3; k++) {
        assert_shape(parts[k], 2, SHAPE(2, 3));
        assert_values(parts[k], 6, VALUES(0, 1, 2, 3, 4, 5), 0);
    }
    DeftNDArrayHandle cols[3] = {NULL, NULL, NULL};
    ck_assert_ok(call("split", 1, &a, &nout, cols, P("num_outputs", "3", "squeeze_axis", "1")));
    assert_shape(cols[2], 1, SHAPE(2));
    assert_values(cols[2], 2, VALUES(2, 5), 0);
    ck_assert_call_fails("Concat", 2, ((DeftNDArrayHandle[]){a, b}), P("dim", "0"),
                         DEFT_ERROR_VALUE, "input 1 has shape (2,2), incompatible with input 0");
    ck_assert_call_fails("Concat", 2, ((DeftNDArrayHandle[]){a, b}), P("num_args", "3"),
                         DEFT_ERROR_VALUE, "num_args is 3 but 2 inputs were given");
    ck_assert_call_fails("split", 1, &a, P("num_outputs", "2"), DEFT_ERROR_VALUE,
                         "axis 1 has size 3, not divisible by 2");
    free_all(5, (DeftNDArrayHandle[]){a, b, cat, cat0, st});
    free_all(3, parts);
    free_all(3, cols);
}
END_TEST

/* Zero-size inputs: nothing to copy, and no offsets from the NULL data of an
 * empty array (undefined behaviour: clang's UBSan stops at "applying zero
 * offset to null pointer"; GCC's does not check it). */
START_TEST(test_concat_stack_split_of_zero_size_arrays) {
    DeftNDArrayHandle e = make(DEFT_FLOAT32, 4, SHAPE(0, 0, 0, 0), NULL);
    DeftNDArrayHandle four[4] = {e, e, e, e};
    DeftNDArrayHandle cat = call1("Concat", 4, four, P("dim", "1"));
    assert_shape(cat, 4, SHAPE(0, 0, 0, 0));
    DeftNDArrayHandle cat0 = call1("Concat", 4, four, P("dim", "0"));
    assert_shape(cat0, 4, SHAPE(0, 0, 0, 0));
    DeftNDArrayHandle st = call1("stack", 4, four, P("axis", "1"));
    assert_shape(st, 5, SHAPE(0, 4, 0, 0, 0));
    DeftNDArrayHandle parts[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_ok(call("split", 1, &e, &nout, parts, P("num_outputs", "2", "axis", "2")));
    for (int k = 0; k < 2; k++) assert_shape(parts[k], 4, SHAPE(0, 0, 0, 0));
    /* rows of zero length: (2,0) split along axis 0 */
    DeftNDArrayHandle rows = make(DEFT_INT64, 2, SHAPE(2, 0), NULL);
    DeftNDArrayHandle halves[2] = {NULL, NULL};
    ck_assert_ok(call("split", 1, &rows, &nout, halves, P("num_outputs", "2", "axis", "0")));
    for (int k = 0; k < 2; k++) assert_shape(halves[k], 2, SHAPE(1, 0));
    /* the gradient of Concat cuts a zero-size gradient into zero-size pieces */
    DeftNDArrayHandle like[3] = {cat, e, e};
    DeftNDArrayHandle pieces[2] = {NULL, NULL};
    ck_assert_ok(call("_split_like", 3, like, &nout, pieces, P("dim", "1")));
    for (int k = 0; k < 2; k++) assert_shape(pieces[k], 4, SHAPE(0, 0, 0, 0));
    DeftNDArrayHandle flat = call1("Reshape", 1, &e, P("shape", "(0,-2)"));
    assert_shape(flat, 4, SHAPE(0, 0, 0, 0));
    /* the other shape operators on (2,0) */
    DeftNDArrayHandle t = call1("transpose", 1, &rows, NO_PARAMS);
    assert_shape(t, 2, SHAPE(0, 2));
    DeftNDArrayHandle sl = call1("slice", 1, &rows, P("begin", "(1,0)", "end", "(2,0)"));
    assert_shape(sl, 2, SHAPE(1, 0));
    DeftNDArrayHandle sa = call1("slice_axis", 1, &rows, P("axis", "0", "begin", "1", "end", "2"));
    assert_shape(sa, 2, SHAPE(1, 0));
    DeftNDArrayHandle bt = call1("broadcast_to", 1, &halves[0], P("shape", "(3,0)"));
    assert_shape(bt, 2, SHAPE(3, 0));
    DeftNDArrayHandle ex = call1("expand_dims", 1, &rows, P("axis", "1"));
    assert_shape(ex, 3, SHAPE(2, 1, 0));
    DeftNDArrayHandle np = call1("_np_reshape", 1, &rows, P("newshape", "(0,5)"));
    assert_shape(np, 2, SHAPE(0, 5));
    DeftNDArrayHandle set[2] = {rows, halves[1]};
    DeftNDArrayHandle as = call1("_slice_assign", 2, set, P("begin", "(0,)", "end", "(1,)"));
    assert_shape(as, 2, SHAPE(2, 0));
    DeftNDArrayHandle back[2] = {sl, rows};
    DeftNDArrayHandle bs =
        call1("_backward_slice", 2, back, P("begin", "(1,0)", "end", "(2,0)", "step", "()"));
    assert_shape(bs, 2, SHAPE(2, 0));
    ck_assert_ok(DeftWaitAll());
    free_all(8, (DeftNDArrayHandle[]){t, sl, sa, bt, ex, np, as, bs});
    free_all(6, (DeftNDArrayHandle[]){e, cat, cat0, st, rows, flat});
    free_all(2, parts);
    free_all(2, halves);
    free_all(2, pieces);
}
END_TEST

START_TEST(test_broadcast_to) {
    DeftNDArrayHandle x = make(DEFT_UINT8, 2, SHAPE(2, 1), VALUES(7, 9));
    DeftNDArrayHandle y = call1("broadcast_to", 1, &x, P("shape", "(3,0,2)"));
    assert_shape(y, 3, SHAPE(3, 2, 2));
    assert_values(y, 12, VALUES(7, 7, 9, 9, 7, 7, 9, 9, 7, 7, 9, 9), 0);
    ck_assert_call_fails("broadcast_to", 1, &x, P("shape", "(3,2)"), DEFT_ERROR_VALUE,
                         "cannot broadcast (2,1) to shape[0] = 3");
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

START_TEST(test_take_modes_and_one_hot) {
    DeftNDArrayHandle a = make_iota(DEFT_FLOAT32, 2, SHAPE(3, 2));
    DeftNDArrayHandle idx = make(DEFT_INT64, 2, SHAPE(2, 2), VALUES(2, 0, -1, 5));
    DeftNDArrayHandle clip = call1("take", 2, (DeftNDArrayHandle[]){a, idx}, NO_PARAMS);
    assert_shape(clip, 3, SHAPE(2, 2, 2));
    assert_values(clip, 8, VALUES(4, 5, 0, 1, 0, 1, 4, 5), 0);
    DeftNDArrayHandle wrap = call1("take", 2, (DeftNDArrayHandle[]){a, idx}, P("mode", "wrap"));
    assert_values(wrap, 8, VALUES(4, 5, 0, 1, 4, 5, 4, 5), 0);
    DeftNDArrayHandle cols = make(DEFT_INT32, 1, SHAPE(3), VALUES(1, 1, 0));
    DeftNDArrayHandle ax1 = call1("take", 2, (DeftNDArrayHandle[]){a, cols}, P("axis", "1"));
    assert_shape(ax1, 2, SHAPE(3, 3));
    assert_values(ax1, 9, VALUES(1, 1, 0, 3, 3, 2, 5, 5, 4), 0);
    DeftNDArrayHandle oh = call1(
        "one_hot", 1, &cols, P("depth", "3", "on_value", "5", "off_value", "-1", "dtype", "int32"));
    assert_shape(oh, 2, SHAPE(3, 3));
    assert_values(oh, 9, VALUES(-1, 5, -1, -1, 5, -1, 5, -1, -1), 0);
    DeftNDArrayHandle out_of_range = make(DEFT_INT32, 1, SHAPE(2), VALUES(3, -1));
    DeftNDArrayHandle oh2 = call1("one_hot", 1, &out_of_range, P("depth", "2"));
    assert_values(oh2, 4, VALUES(0, 0, 0, 0), 0);
    ck_assert_call_fails("one_hot", 1, &cols, P("depth", "0"), DEFT_ERROR_VALUE,
                         "depth is 0, expected >= 1");
    free_all(9, (DeftNDArrayHandle[]){a, idx, clip, wrap, cols, ax1, oh, out_of_range, oh2});
}
END_TEST

static Suite *shape_suite(void) {
    Suite *suite = suite_create("shape ops");
    TCase *tc = tcase_create("shape");
    tcase_add_test(tc, test_reshape_special_values_and_errors);
    tcase_add_test(tc, test_np_reshape_takes_the_shape_literally);
    tcase_add_test(tc, test_np_reshape_gradient_has_the_input_shape);
    tcase_add_test(tc, test_block_grad_stops_the_gradient);
    tcase_add_test(tc, test_device_parameters_refuse_cpu_n);
    tcase_add_loop_test(tc, test_transpose_matches_index_arithmetic, 0, 5);
    tcase_add_test(tc, test_expand_dims_and_squeeze);
    tcase_add_test(tc, test_slice_like_python);
    tcase_add_test(tc, test_slice_with_huge_steps);
    tcase_add_test(tc, test_slice_assign_in_place_and_broadcast);
    tcase_add_loop_test(tc, test_concat_stack_split_roundtrip, 0, 5);
    tcase_add_test(tc, test_concat_stack_split_of_zero_size_arrays);
    tcase_add_test(tc, test_broadcast_to);
    tcase_add_test(tc, test_take_modes_and_one_hot);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(shape_suite());
}
