/* Autograd through the recorded graph: values, modes, errors, plan reuse, memory. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "capi/src/handle.h"
#include "check_helpers.h"
#include "core/imperative/autograd.h"
#include "symbol_helpers.h"

static void set_recording(int on) {
    ck_assert_ok(DeftAutogradSetIsRecording(on, NULL));
}

static DeftNDArrayHandle marked(int n, const double *values, DeftNDArrayHandle *grad, int req) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(n), values);
    *grad = make(DEFT_FLOAT64, 1, SHAPE(n), NULL);
    ck_assert_ok(DeftAutogradMarkVariables(1, &x, &req, grad));
    return x;
}

/* y = x*x + 3x, summed: dy/dx = 2x + 3. */
static DeftNDArrayHandle poly(DeftNDArrayHandle x) {
    DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    DeftNDArrayHandle lin = call1("_mul_scalar", 1, &x, P("scalar", "3"));
    DeftNDArrayHandle y = call1("elemwise_add", 2, (DeftNDArrayHandle[]){sq, lin}, NO_PARAMS);
    DeftNDArrayHandle s = call1("sum", 1, &y, NO_PARAMS);
    free_all(1, &sq), free_all(1, &lin), free_all(1, &y);
    return s;
}

START_TEST(backward_writes_gradients) {
    DeftNDArrayHandle g, x = marked(3, VALUES(1, -2, 0.5), &g, DEFT_GRAD_WRITE);
    set_recording(1);
    DeftNDArrayHandle s = poly(x);
    set_recording(0);
    assert_values(s, 1, VALUES(1 + 3 + 4 - 6 + 0.25 + 1.5), 1e-12);
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    assert_values(g, 3, VALUES(5, -1, 4), 1e-12);
    free_all(1, &s), free_all(1, &x), free_all(1, &g);
}
END_TEST

START_TEST(grad_req_add_accumulates) {
    DeftNDArrayHandle g, x = marked(2, VALUES(1, 2), &g, DEFT_GRAD_ADD);
    for (int round = 0; round < 3; round++) {
        set_recording(1);
        DeftNDArrayHandle s = poly(x);
        set_recording(0);
        ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
        free_all(1, &s);
    }
    assert_values(g, 2, VALUES(15, 21), 1e-12);
    free_all(1, &x), free_all(1, &g);
}
END_TEST

START_TEST(head_gradients_and_shapes) {
    DeftNDArrayHandle g, x = marked(3, VALUES(1, 2, 3), &g, DEFT_GRAD_WRITE);
    set_recording(1);
    DeftNDArrayHandle y = call1("exp", 1, &x, NO_PARAMS);
    set_recording(0);
    DeftNDArrayHandle hg = make(DEFT_FLOAT64, 1, SHAPE(3), VALUES(1, 0, -2));
    ck_assert_ok(DeftAutogradBackward(1, &y, &hg, 1, 0));
    assert_values(g, 3, VALUES(exp(1.0), 0, -2 * exp(3.0)), 1e-12);
    DeftNDArrayHandle bad = make(DEFT_FLOAT64, 1, SHAPE(2), NULL);
    ck_assert_fails(DeftAutogradBackward(1, &y, &bad, 1, 0), DEFT_ERROR_VALUE,
                    "head_grads[0] has shape (2,) float64, expected (3,)");
    free_all(1, &y), free_all(1, &x), free_all(1, &g), free_all(1, &hg), free_all(1, &bad);
}
END_TEST

START_TEST(compute_gradient_returns_arrays) {
    DeftNDArrayHandle gx, x = marked(2, VALUES(2, 3), &gx, DEFT_GRAD_WRITE);
    DeftNDArrayHandle gz, z = marked(2, VALUES(5, 7), &gz, DEFT_GRAD_WRITE);
    DeftNDArrayHandle plain = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(1, 1));
    set_recording(1);
    DeftNDArrayHandle y = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, plain}, NO_PARAMS);
    set_recording(0);
    DeftNDArrayHandle out[2] = {NULL, NULL};
    ck_assert_ok(
        DeftAutogradComputeGradient(1, &y, NULL, 2, (DeftNDArrayHandle[]){x, z}, 1, 0, out));
    assert_values(out[0], 2, VALUES(1, 1), 0);
    assert_values(out[1], 2, VALUES(0, 0), 0); /* y does not depend on z */
    assert_values(gx, 2, VALUES(0, 0), 0);     /* the variables' gradients are untouched */
    ck_assert_fails(DeftAutogradComputeGradient(1, &y, NULL, 1, &plain, 1, 0, out),
                    DEFT_ERROR_VALUE, "variables[0] is not marked");
    free_all(2, out);
    free_all(1, &y), free_all(1, &x), free_all(1, &gx), free_all(1, &z), free_all(1, &gz);
    free_all(1, &plain);
}
END_TEST

/* d/dx of d/dx x^3 = 6x, through create_graph. */
START_TEST(second_derivative) {
    DeftNDArrayHandle g, x = marked(3, VALUES(1, -2, 0.5), &g, DEFT_GRAD_WRITE);
    set_recording(1);
    DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    DeftNDArrayHandle cube = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){sq, x}, NO_PARAMS);
    DeftNDArrayHandle dx = NULL;
    ck_assert_ok(DeftAutogradComputeGradient(1, &cube, NULL, 1, &x, 0, 1, &dx));
    assert_values(dx, 3, VALUES(3, 12, 0.75), 1e-12);
    DeftNDArrayHandle s = call1("sum", 1, &dx, NO_PARAMS);
    set_recording(0);
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    assert_values(g, 3, VALUES(6, -12, 3), 1e-12);
    free_all(1, &s), free_all(1, &dx), free_all(1, &cube), free_all(1, &sq);
    free_all(1, &x), free_all(1, &g);
}
END_TEST

/* backward with create_graph writes a gradient with history into the
 * variable's gradient array; that history reaches the variable, whose
 * record holds the gradient array: a cycle, broken when the variable goes. */
START_TEST(create_graph_into_a_variable_leaks_nothing) {
    int64_t arrays = 0, bytes = mem_stat(DEFT_MEM_LIVE_BYTES);
    ck_assert_ok(DeftGetLiveNDArrayCount(&arrays));
    for (int round = 0; round < 3; round++) {
        DeftNDArrayHandle g, x = marked(3, VALUES(1, -2, 0.5), &g, DEFT_GRAD_WRITE);
        set_recording(1);
        DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
        DeftNDArrayHandle cube = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){sq, x}, NO_PARAMS);
        DeftNDArrayHandle s = call1("sum", 1, &cube, NO_PARAMS);
        set_recording(0);
        ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 1)); /* create_graph */
        assert_values(g, 3, VALUES(3, 12, 0.75), 1e-12);
        /* freed in either order: the gradient array before its variable, or after */
        if (round % 2) free_all(1, &g);
        free_all(4, (DeftNDArrayHandle[]){s, cube, sq, x});
        if (round % 2 == 0) free_all(1, &g);
    }
    int64_t arrays_after;
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), bytes);
    ck_assert_ok(DeftGetLiveNDArrayCount(&arrays_after));
    ck_assert_int_eq(arrays_after, arrays);
}
END_TEST

/* The same through a reduction: the gradient of mean is itself differentiated. */
START_TEST(second_derivative_through_a_reduction) {
    DeftNDArrayHandle g, x = marked(2, VALUES(1, 2), &g, DEFT_GRAD_WRITE);
    set_recording(1);
    DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    DeftNDArrayHandle cube = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){sq, x}, NO_PARAMS);
    DeftNDArrayHandle m = call1("mean", 1, &cube, NO_PARAMS);
    DeftNDArrayHandle dx = NULL;
    ck_assert_ok(DeftAutogradComputeGradient(1, &m, NULL, 1, &x, 0, 1, &dx));
    assert_values(dx, 2, VALUES(1.5, 6), 1e-12); /* 3x^2 / 2 */
    DeftNDArrayHandle s = call1("sum", 1, &dx, NO_PARAMS);
    set_recording(0);
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    assert_values(g, 2, VALUES(3, 6), 1e-12); /* 3x */
    free_all(1, &s), free_all(1, &dx), free_all(1, &m), free_all(1, &cube), free_all(1, &sq);
    free_all(1, &x), free_all(1, &g);
}
END_TEST

START_TEST(retain_graph) {
    DeftNDArrayHandle g, x = marked(2, VALUES(1, 2), &g, DEFT_GRAD_WRITE);
    set_recording(1);
    DeftNDArrayHandle s = poly(x);
    set_recording(0);
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 1, 0));
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    assert_values(g, 2, VALUES(5, 7), 1e-12);
    ck_assert_fails(DeftAutogradBackward(1, &s, NULL, 0, 0), DEFT_ERROR_VALUE, "retain_graph");
    free_all(1, &s), free_all(1, &x), free_all(1, &g);
}
END_TEST

START_TEST(errors) {
    DeftNDArrayHandle g, x = marked(2, VALUES(1, 2), &g, DEFT_GRAD_WRITE);
    DeftNDArrayHandle y = call1("exp", 1, &x, NO_PARAMS); /* not recording: no history */
    ck_assert_fails(DeftAutogradBackward(1, &y, NULL, 0, 0), DEFT_ERROR_VALUE,
                    "heads[0] does not depend on any variable");
    ck_assert_fails(DeftAutogradBackward(0, &y, NULL, 0, 0), DEFT_ERROR_VALUE, "num_heads is 0");
    int bad_req = 7;
    ck_assert_fails(DeftAutogradMarkVariables(1, &x, &bad_req, &g), DEFT_ERROR_VALUE,
                    "grad_reqs[0] is 7");
    DeftNDArrayHandle wrong = make(DEFT_FLOAT32, 1, SHAPE(2), NULL);
    ck_assert_fails(DeftAutogradMarkVariables(1, &x, NULL, &wrong), DEFT_ERROR_VALUE,
                    "grads[0] has shape (2,) float32");
    /* an in-place write over a value the gradient needs is refused before it happens */
    set_recording(1);
    DeftNDArrayHandle sq = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    DeftNDArrayHandle out[1] = {x};
    int nout = 1;
    ck_assert_fails(call("elemwise_mul", 2, (DeftNDArrayHandle[]){x, x}, &nout, out, NO_PARAMS),
                    DEFT_ERROR_VALUE, "recording for autograd needs its value");
    set_recording(0);
    assert_values(x, 2, VALUES(1, 2), 0);
    free_all(1, &sq), free_all(1, &y), free_all(1, &x), free_all(1, &g), free_all(1, &wrong);
}
END_TEST

/* An import of `n` doubles at data, owned by the caller (no deleter work). */
static void no_delete(DLManagedTensor *managed) {
    (void)managed;
}

static DeftNDArrayHandle borrow(double *data, int64_t *n, DLManagedTensor *t) {
    *t = (DLManagedTensor){
        .dl_tensor = {.data = data,
                      .device = {kDLCPU, 0},
                      .ndim = 1,
                      .dtype = {kDLFloat, 64, 1},
                      .shape = n},
        .deleter = no_delete,
    };
    DeftNDArrayHandle arr;
    ck_assert_ok(DeftNDArrayFromDLPack(t, &arr));
    return arr;
}

/* Backward must not write a gradient over a variable or over another
 * gradient; disjoint parts of one flat buffer are fine. */
START_TEST(gradient_memory_must_not_overlap) {
    double flat[4] = {0}, x_data[2] = {1, 2};
    int64_t two = 2;
    DLManagedTensor parts[4];
    DeftNDArrayHandle x = borrow(x_data, &two, &parts[0]);
    DeftNDArrayHandle y = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(3, 4));
    DeftNDArrayHandle low = borrow(flat, &two, &parts[1]), high = borrow(flat + 2, &two, &parts[2]);
    DeftNDArrayHandle middle = borrow(flat + 1, &two, &parts[3]);
    DeftNDArrayHandle vars[2] = {x, y};
    ck_assert_fails(DeftAutogradMarkVariables(1, &x, NULL, &x), DEFT_ERROR_VALUE,
                    "grads[0] shares memory with variables[0]: backward would overwrite");
    ck_assert_fails(DeftAutogradMarkVariables(2, vars, NULL, (DeftNDArrayHandle[]){y, low}),
                    DEFT_ERROR_VALUE, "grads[0] shares memory with variables[1]");
    ck_assert_fails(DeftAutogradMarkVariables(2, vars, NULL, (DeftNDArrayHandle[]){low, middle}),
                    DEFT_ERROR_VALUE, "grads[0] and grads[1] share memory");
    ck_assert_fails(DeftAutogradMarkVariables(2, vars, NULL, (DeftNDArrayHandle[]){low, low}),
                    DEFT_ERROR_VALUE, "grads[0] and grads[1] share memory");
    /* through DLPack: another handle on x's memory */
    DeftNDArrayHandle x_again = borrow(x_data, &two, &parts[3]);
    ck_assert_fails(DeftAutogradMarkVariables(1, &x, NULL, &x_again), DEFT_ERROR_VALUE,
                    "grads[0] shares memory with variables[0]");
    ck_assert_ok(DeftAutogradMarkVariables(2, vars, NULL, (DeftNDArrayHandle[]){low, high}));
    set_recording(1);
    DeftNDArrayHandle sx = poly(x), sy = poly(y);
    DeftNDArrayHandle s = call1("elemwise_add", 2, (DeftNDArrayHandle[]){sx, sy}, NO_PARAMS);
    set_recording(0);
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    ck_assert_ok(DeftNDArrayWaitToRead(low));
    ck_assert_ok(DeftNDArrayWaitToRead(high));
    ck_assert(flat[0] == 5 && flat[1] == 7 && flat[2] == 9 && flat[3] == 11); /* 2v + 3 */
    DeftNDArrayHandle all[] = {s, sx, sy, x_again, middle, high, low, y, x};
    free_all(9, all);
}
END_TEST

/* Writing a value that a recorded node saved for its gradient is caught at backward. */
START_TEST(saved_value_overwritten) {
    DeftNDArrayHandle g, x = marked(2, VALUES(1, 2), &g, DEFT_GRAD_WRITE);
    DeftNDArrayHandle c = make(DEFT_FLOAT64, 1, SHAPE(2), VALUES(3, 4));
    set_recording(1);
    DeftNDArrayHandle y = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, c}, NO_PARAMS);
    DeftNDArrayHandle z = call1("elemwise_add", 2, (DeftNDArrayHandle[]){x, c}, NO_PARAMS);
    set_recording(0);
    set_values(c, 2, VALUES(5, 6)); /* mul saved c; add saved nothing */
    ck_assert_fails(DeftAutogradBackward(1, &y, NULL, 1, 0), DEFT_ERROR_VALUE,
                    "input 1 of a recorded 'elemwise_mul' was overwritten in place");
    ck_assert_ok(DeftAutogradBackward(1, &z, NULL, 0, 0));
    assert_values(g, 2, VALUES(1, 1), 0);
    DeftNDArrayHandle all[] = {x, g, c, y, z};
    free_all(5, all);
}
END_TEST

START_TEST(backward_plan_is_reused) {
    DeftNDArrayHandle g, x = marked(4, VALUES(1, 2, 3, 4), &g, DEFT_GRAD_WRITE);
    long before = -1;
    for (int step = 0; step < 10; step++) {
        set_recording(1);
        DeftNDArrayHandle s = poly(x);
        set_recording(0);
        ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
        if (step == 0) before = deft_autograd_plans_built();
        free_all(1, &s);
    }
    ck_assert_int_eq(deft_autograd_plans_built(), before); /* built once, then reused */
    assert_values(g, 4, VALUES(5, 7, 9, 11), 1e-12);
    free_all(1, &x), free_all(1, &g);
}
END_TEST

/* x * a + x * x: a's value is part of the plan (the plan runs copies of the nodes). */
static DeftNDArrayHandle scaled(DeftNDArrayHandle x, const char *a) {
    DeftNDArrayHandle xa = call1("_mul_scalar", 1, &x, P("scalar", a));
    DeftNDArrayHandle xx = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    DeftNDArrayHandle s = call1("elemwise_add", 2, (DeftNDArrayHandle[]){xa, xx}, NO_PARAMS);
    free_all(1, &xa), free_all(1, &xx);
    return s;
}

START_TEST(backward_plan_hits_and_misses) {
    DeftNDArrayHandle g, x = marked(2, VALUES(1, 2), &g, DEFT_GRAD_WRITE);
    DeftNDArrayHandle h, y = marked(2, VALUES(3, 5), &h, DEFT_GRAD_WRITE);
    const char *scalars[] = {"3", "3", "4", "3"};
    for (int step = 0; step < 4; step++) {
        long built = deft_autograd_plans_built(), hits = deft_autograd_plan_hits();
        set_recording(1);
        DeftNDArrayHandle s = scaled(x, scalars[step]);
        set_recording(0);
        ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
        double a = atof(scalars[step]);
        assert_values(g, 2, VALUES(a + 2, a + 4), 1e-12);
        if (step == 1 || step == 3) { /* seen: matched, found, nothing rebuilt */
            ck_assert_int_eq(deft_autograd_plan_hits(), hits + 1);
            ck_assert_int_eq(deft_autograd_plans_built(), built);
        }
        if (step == 2) ck_assert_int_eq(deft_autograd_plans_built(), built + 1); /* a new a */
        free_all(1, &s);
    }
    /* The same graph differentiated for (x, y) and for (y, x): two plans, each right. */
    for (int order = 0; order < 4; order++) {
        set_recording(1);
        DeftNDArrayHandle xy = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, y}, NO_PARAMS);
        DeftNDArrayHandle s = call1("_mul_scalar", 1, &xy, P("scalar", "2"));
        set_recording(0);
        DeftNDArrayHandle vars[2] = {order % 2 ? y : x, order % 2 ? x : y}, grads[2] = {NULL};
        ck_assert_ok(DeftAutogradComputeGradient(1, &s, NULL, 2, vars, 0, 0, grads));
        assert_values(grads[0], 2, order % 2 ? VALUES(2, 4) : VALUES(6, 10), 1e-12);
        assert_values(grads[1], 2, order % 2 ? VALUES(6, 10) : VALUES(2, 4), 1e-12);
        DeftNDArrayHandle all[] = {xy, s, grads[0], grads[1]};
        free_all(4, all);
    }
    DeftNDArrayHandle all[] = {x, g, y, h};
    free_all(4, all);
}
END_TEST

/* A seen shape's cut is matched, not walked: the gradients stay right. */
START_TEST(backward_matches_seen_shapes) {
    DeftNDArrayHandle g, x = marked(4, VALUES(1, 2, 3, 4), &g, DEFT_GRAD_WRITE);
    long before = 0;
    for (int step = 0; step < 5; step++) {
        if (step == 1) before = deft_autograd_cuts_matched();
        set_recording(1);
        DeftNDArrayHandle s = poly(x);
        set_recording(0);
        ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
        assert_values(g, 4, VALUES(5, 7, 9, 11), 1e-12);
        free_all(1, &s);
    }
    ck_assert_int_eq(deft_autograd_cuts_matched() - before, 4);
    free_all(1, &x), free_all(1, &g);
}
END_TEST

/* x * c with c: a marked variable; a constant; a constant of another shape, broadcast; exp(w)
 * of a marked w. Four cuts (c a variable, a leaf, a leaf of another desc, a node needing its
 * gradient): each is walked the first time, not taken for another's shape, and every
 * gradient is written. */
static DeftNDArrayHandle times_c(DeftNDArrayHandle x, DeftNDArrayHandle c, DeftNDArrayHandle w) {
    DeftNDArrayHandle e = w ? call1("exp", 1, &w, NO_PARAMS) : NULL;
    DeftNDArrayHandle y = call1("broadcast_mul", 2, (DeftNDArrayHandle[]){x, w ? e : c}, NO_PARAMS);
    DeftNDArrayHandle s = call1("sum", 1, &y, NO_PARAMS);
    DeftNDArrayHandle all[] = {y, e};
    free_all(w ? 2 : 1, all);
    return s;
}

START_TEST(backward_match_tells_leaves_apart) {
    int req = DEFT_GRAD_WRITE;
    DeftNDArrayHandle v[3], g[3]; /* x, c, w */
    const double *init[3] = {VALUES(1, 2, 3, 4), VALUES(5, 6, 7, 8), VALUES(0, 0, 0, 0)};
    for (int i = 0; i < 3; i++) {
        v[i] = make(DEFT_FLOAT64, 2, SHAPE(2, 2), init[i]);
        g[i] = make(DEFT_FLOAT64, 2, SHAPE(2, 2), NULL);
        ck_assert_ok(DeftAutogradMarkVariables(1, &v[i], &req, &g[i]));
    }
    DeftNDArrayHandle c[4] = {v[1], make(DEFT_FLOAT64, 2, SHAPE(2, 2), init[1]),
                              make(DEFT_FLOAT64, 2, SHAPE(1, 2), VALUES(5, 6)), NULL};
    const double *want_x[4] = {init[1], init[1], VALUES(5, 6, 5, 6), VALUES(1, 1, 1, 1)};
    for (int step = 0; step < 8; step++) {
        int k = step % 4;
        long matched = deft_autograd_cuts_matched();
        for (int i = 1; i < 3; i++) set_values(g[i], 4, VALUES(0, 0, 0, 0));
        set_recording(1);
        DeftNDArrayHandle s = times_c(v[0], c[k], k == 3 ? v[2] : NULL);
        set_recording(0);
        ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
        assert_values(g[0], 4, want_x[k], 1e-12);
        assert_values(g[1], 4, k == 0 ? init[0] : init[2], 1e-12);
        assert_values(g[2], 4, k == 3 ? init[0] : init[2], 1e-12);
        ck_assert_int_eq(deft_autograd_cuts_matched() - matched, step >= 4);
        free_all(1, &s);
    }
    DeftNDArrayHandle all[] = {v[0], v[1], v[2], g[0], g[1], g[2], c[1], c[2]};
    free_all(8, all);
}
END_TEST

START_TEST(deferred_and_autograd_together) {
    DeftNDArrayHandle g, x = marked(3, VALUES(1, -2, 0.5), &g, DEFT_GRAD_WRITE);
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    set_recording(1);
    DeftNDArrayHandle s = poly(x);
    set_recording(0);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    int lazy = 0;
    ck_assert_ok(DeftNDArrayGetIsDeferredCompute(&s, 1, &lazy));
    ck_assert_int_eq(lazy, 1);
    DeftSymbolHandle sym; /* the same recording exports, as a hybridized block would */
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(&x, &s, (const char *[]){"x"},
                                                     (const char *[]){"s"}, 1, 1, &sym));
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0)); /* computes s first */
    assert_values(g, 3, VALUES(5, -1, 4), 1e-12);
    assert_values(s, 1, VALUES(1 + 3 + 4 - 6 + 0.25 + 1.5), 1e-12);
    ck_assert_ok(DeftSymbolFree(sym));
    free_all(1, &s), free_all(1, &x), free_all(1, &g);
}
END_TEST

/* An executor called while recording is one node, differentiated through its graph. */
START_TEST(executor_call_is_one_node) {
    DeftSymbolHandle sx = var("x"), se = apply("exp", NULL, 1, &sx, NO_PARAMS);
    DeftSymbolHandle sy = apply("elemwise_mul", NULL, 2, (DeftSymbolHandle[]){se, sx}, NO_PARAMS);
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(sy, 0, &exec));
    DeftNDArrayHandle g, x = marked(3, VALUES(0.5, 1, -1), &g, DEFT_GRAD_WRITE);
    set_recording(1);
    DeftNDArrayHandle y = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, &y));
    DeftNDArrayHandle s = call1("sum", 1, &y, NO_PARAMS);
    set_recording(0);
    const deft_ndarray_t *arr = deft_handle_lookup(y, DEFT_HANDLE_NDARRAY);
    ck_assert_str_eq(arr->entry.node->op->op->name, "_CachedOp");
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    double xs[3] = {0.5, 1, -1}, want[3];
    for (int i = 0; i < 3; i++) want[i] = exp(xs[i]) * (1 + xs[i]);
    assert_values(g, 3, want, 1e-12);

    /* deferred, and deferred with recording: lazy, exported inline, differentiable */
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    set_recording(1);
    DeftNDArrayHandle z = NULL;
    nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, &z));
    DeftNDArrayHandle w = call1("_plus_scalar", 1, &z, P("scalar", "1"));
    set_recording(0);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    int lazy = 0;
    ck_assert_ok(DeftNDArrayGetIsDeferredCompute(&w, 1, &lazy));
    ck_assert_int_eq(lazy, 1);
    DeftSymbolHandle sym;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(&x, &w, (const char *[]){"x"},
                                                     (const char *[]){"w"}, 1, 1, &sym));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    ck_assert_int_eq(count_text(json, "_CachedOp"), 0);
    ck_assert_int_eq(count_text(json, "\"exp\""), 1);
    for (int i = 0; i < 3; i++) want[i] = exp(xs[i]) * xs[i] + 1;
    assert_values(w, 3, want, 1e-12);
    ck_assert_ok(DeftAutogradBackward(1, &w, NULL, 0, 0));
    for (int i = 0; i < 3; i++) want[i] = exp(xs[i]) * (1 + xs[i]);
    assert_values(g, 3, want, 1e-12);
    ck_assert_ok(DeftSymbolFree(sym));
    DeftNDArrayHandle all[] = {y, s, z, w, x, g};
    free_all(6, all);
    ck_assert_ok(DeftCachedOpFree(exec));
    DeftSymbolHandle syms[] = {sx, se, sy};
    for (int i = 0; i < 3; i++) ck_assert_ok(DeftSymbolFree(syms[i]));
}
END_TEST

/* Record poly by deferred compute, export, run the exported graph in an
 * executor while recording: its gradient matches the imperative one. */
START_TEST(gradient_through_exported_graph) {
    DeftNDArrayHandle g, x = marked(3, VALUES(1, -2, 0.5), &g, DEFT_GRAD_WRITE);
    set_recording(1);
    DeftNDArrayHandle s = poly(x);
    set_recording(0);
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    int64_t n;
    double *imperative = read_all(g, &n);
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle lazy = poly(x);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    DeftSymbolHandle sym;
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(&x, &lazy, (const char *[]){"x"},
                                                     (const char *[]){"s"}, 1, 1, &sym));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(sym, &json));
    DeftSymbolHandle loaded;
    ck_assert_ok(DeftSymbolCreateFromJSON(json, &loaded));
    ck_assert_ok(DeftCachedOpCreate(loaded, 0, &exec));
    set_recording(1);
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, &out));
    set_recording(0);
    ck_assert_ok(DeftAutogradBackward(1, &out, NULL, 0, 0));
    assert_values(g, 3, imperative, 0);
    free(imperative);
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
    ck_assert_ok(DeftSymbolFree(loaded));
    DeftNDArrayHandle all[] = {s, lazy, out, x, g};
    free_all(5, all);
}
END_TEST

/* A random operator inside a cached graph: a call recorded by autograd keeps
 * the values drawn, so the gradient belongs to the forward run. A call
 * recorded by deferred compute would have its graph recomputed by the
 * inlined gradient, drawing new values: differentiating it is refused, not
 * silently wrong. */
START_TEST(random_inside_a_cached_graph) {
    DeftNDArrayHandle g, x = marked(4, VALUES(1, 2, 3, 4), &g, DEFT_GRAD_WRITE);
    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    DeftNDArrayHandle noise =
        call1("_random_uniform", 0, NULL, P("shape", "(4,)", "dtype", "float64"));
    DeftNDArrayHandle y = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, noise}, NO_PARAMS);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    DeftSymbolHandle sym;
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftNDArrayGetDeferredComputeSymbol(&x, &y, (const char *[]){"x"},
                                                     (const char *[]){"y"}, 1, 1, &sym));
    ck_assert_ok(DeftCachedOpCreate(sym, 0, &exec));
    set_recording(1);
    DeftNDArrayHandle out = NULL;
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(exec, 1, &x, &nout, &out));
    set_recording(0);
    ck_assert_ok(DeftAutogradBackward(1, &out, NULL, 0, 0));
    int64_t n;
    double *drawn = read_all(out, &n), *grad = read_all(g, &n);
    for (int i = 0; i < 4; i++) ck_assert_double_eq_tol(grad[i], drawn[i] / (i + 1), 1e-15);
    free(drawn), free(grad);

    ck_assert_ok(DeftSetIsDeferredCompute(1, NULL));
    set_recording(1);
    DeftNDArrayHandle lazy = NULL;
    nout = 1;
    int status = DeftCachedOpInvoke(exec, 1, &x, &nout, &lazy);
    set_recording(0);
    ck_assert_ok(DeftSetIsDeferredCompute(0, NULL));
    if (status == 0) status = DeftAutogradBackward(1, &lazy, NULL, 0, 0);
    ck_assert_int_eq(status, -1);
    ck_assert_int_eq(DeftGetLastErrorKind(), DEFT_ERROR_NOT_IMPLEMENTED);
    ck_assert_ptr_nonnull(strstr(DeftGetLastError(), "'_random_uniform', a random operator"));
    ck_assert_ok(DeftCachedOpFree(exec));
    ck_assert_ok(DeftSymbolFree(sym));
    DeftNDArrayHandle all[] = {noise, y, x, g, out};
    free_all(5, all);
    if (lazy) ck_assert_ok(DeftNDArrayFree(lazy));
}
END_TEST

/* ---- memory ---- */

/* An add's gradient reads neither input, so a constant added in is not kept; a mul keeps it. */
START_TEST(nodes_keep_what_their_gradient_reads) {
    DeftNDArrayHandle g, x = marked(1024, NULL, &g, DEFT_GRAD_WRITE);
    int64_t base = mem_stat(DEFT_MEM_LIVE_BYTES);
    DeftNDArrayHandle c = make(DEFT_FLOAT64, 1, SHAPE(1024), NULL);
    set_recording(1);
    DeftNDArrayHandle y = call1("elemwise_add", 2, (DeftNDArrayHandle[]){x, c}, NO_PARAMS);
    set_recording(0);
    free_all(1, &c);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - base, 1024 * 8); /* y only */
    DeftNDArrayHandle d = make(DEFT_FLOAT64, 1, SHAPE(1024), NULL);
    set_recording(1);
    DeftNDArrayHandle z = call1("elemwise_mul", 2, (DeftNDArrayHandle[]){x, d}, NO_PARAMS);
    set_recording(0);
    free_all(1, &d);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - base, 3 * 1024 * 8); /* y, z, and d kept */
    free_all(1, &z);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - base, 1024 * 8);
    free_all(1, &y);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), base);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), base);
    free_all(1, &x), free_all(1, &g);
}
END_TEST

/* sum reads only its input's shape; exp keeps its output, not its input. The
 * second round starts after the first has cached its backward plan (whose
 * arena stays allocated for the next backward of that shape). */
START_TEST(sum_and_exp_keep_little) {
    DeftNDArrayHandle g, x = marked(1024, NULL, &g, DEFT_GRAD_WRITE);
    int64_t base = 0;
    for (int round = 0; round < 2; round++) {
        if (round == 1) base = mem_stat(DEFT_MEM_LIVE_BYTES);
        int64_t start = mem_stat(DEFT_MEM_LIVE_BYTES);
        set_recording(1);
        DeftNDArrayHandle u = call1("_mul_scalar", 1, &x, P("scalar", "2"));
        DeftNDArrayHandle total = call1("sum", 1, &u, NO_PARAMS);
        DeftNDArrayHandle v = call1("_mul_scalar", 1, &x, P("scalar", "3"));
        DeftNDArrayHandle e = call1("exp", 1, &v, NO_PARAMS);
        set_recording(0);
        free_all(1, &u), free_all(1, &v);
        ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES) - start, 8 + 1024 * 8); /* total, e */
        ck_assert_ok(DeftAutogradBackward(2, (DeftNDArrayHandle[]){total, e}, NULL, 0, 0));
        double want[1024];
        int64_t n;
        double *es = read_all(e, &n);
        for (int i = 0; i < 1024; i++) want[i] = 2 + 3 * es[i];
        assert_values(g, 1024, want, 1e-12);
        free(es);
        free_all(1, &total), free_all(1, &e);
    }
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), base);
    free_all(1, &x), free_all(1, &g);
}
END_TEST

typedef enum { IMPERATIVE, DEFERRED, RECORDING } run_mode_t;

/* A million small calls, each result freed: live bytes end where they began
 * and the peak does not grow after the first thousand. */
static void million_ops(run_mode_t mode) {
    DeftNDArrayHandle g, x = marked(4, VALUES(1, 2, 3, 4), &g, DEFT_GRAD_WRITE);
    DeftOpHandle op = op_named("_mul_scalar");
    const char *key = "scalar", *val = "2";
    int64_t live = mem_stat(DEFT_MEM_LIVE_BYTES), peak = 0;
    int failures = 0;
    for (int i = 0; i < loop_ops(); i++) {
        if (mode == DEFERRED) DeftSetIsDeferredCompute(1, NULL);
        if (mode == RECORDING) DeftAutogradSetIsRecording(1, NULL);
        DeftNDArrayHandle y = NULL;
        int nout = 1;
        failures += DeftImperativeInvoke(op, 1, &x, &nout, &y, 1, &key, &val) != 0;
        DeftSetIsDeferredCompute(0, NULL);
        DeftAutogradSetIsRecording(0, NULL);
        if (mode == DEFERRED && i % 1000 == 0) failures += DeftNDArrayWaitToRead(y) != 0;
        failures += DeftNDArrayFree(y) != 0;
        if (i == 1000) peak = mem_stat(DEFT_MEM_PEAK_BYTES);
    }
    ck_assert_int_eq(failures, 0);
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), live);
    ck_assert_int_eq(mem_stat(DEFT_MEM_PEAK_BYTES), peak);
    free_all(1, &x), free_all(1, &g);
}

START_TEST(million_imperative) {
    million_ops(IMPERATIVE);
}
END_TEST

START_TEST(million_deferred) {
    million_ops(DEFERRED);
}
END_TEST

START_TEST(million_recording) {
    million_ops(RECORDING);
}
END_TEST

/* Backward through a chain of `calls` recorded relu calls (more than any
 * fixed input count): the gradient is 1 where x > 0, else 0. */
static void backward_through_relu_chain(int calls) {
    DeftNDArrayHandle g, x = marked(4, VALUES(1, -2, 0.5, 3), &g, DEFT_GRAD_WRITE);
    DeftNDArrayHandle y = x;
    set_recording(1);
    for (int i = 0; i < calls; i++) {
        DeftNDArrayHandle next = call1("relu", 1, &y, NO_PARAMS);
        if (y != x) free_all(1, &y);
        y = next;
    }
    set_recording(0);
    assert_values(y, 4, VALUES(1, 0, 0.5, 3), 0);
    ck_assert_ok(DeftAutogradBackward(1, &y, NULL, 0, 0));
    assert_values(g, 4, VALUES(1, 0, 1, 1), 0);
    free_all(1, &y), free_all(1, &x), free_all(1, &g);
}

START_TEST(backward_through_300_recorded_calls) {
    backward_through_relu_chain(300);
}
END_TEST

START_TEST(backward_through_2000_recorded_calls) {
    backward_through_relu_chain(2000);
}
END_TEST

/* Backward of sum(relu(relu(relu(x)))) for n float64 values x[i] = i % 3 - 1:
 * the gradient is 1 where x > 0. Its plan's arena holds n-value intermediates. */
static void backward_of_shape(int64_t n) {
    double *xs = malloc((size_t)n * sizeof *xs), *want = malloc((size_t)n * sizeof *want);
    ck_assert_ptr_nonnull(xs);
    ck_assert_ptr_nonnull(want);
    for (int64_t i = 0; i < n; i++) xs[i] = (double)(i % 3) - 1, want[i] = i % 3 == 2;
    DeftNDArrayHandle g, x = marked((int)n, xs, &g, DEFT_GRAD_WRITE);
    DeftNDArrayHandle y = x;
    set_recording(1);
    for (int i = 0; i < 3; i++) {
        DeftNDArrayHandle next = call1("relu", 1, &y, NO_PARAMS);
        if (y != x) free_all(1, &y);
        y = next;
    }
    DeftNDArrayHandle s = call1("sum", 1, &y, NO_PARAMS);
    set_recording(0);
    ck_assert_ok(DeftAutogradBackward(1, &s, NULL, 0, 0));
    assert_values(g, n, want, 0);
    free_all(1, &s), free_all(1, &y), free_all(1, &x), free_all(1, &g);
    free(xs), free(want);
}

/* 100 shapes of backward, each plan with an arena of 512 KiB or more: the
 * backward cache keeps at most DEFT_PLAN_CACHE_BYTES (4 MiB, set by main) of
 * arenas, DeftMemoryReleaseCached drops them, and evicted plans are made
 * again with the same results. */
START_TEST(backward_plan_cache_is_bounded_and_released) {
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    int64_t base = mem_stat(DEFT_MEM_LIVE_BYTES), highest = 0;
    for (int s = 0; s < 100; s++) {
        backward_of_shape(65536 + 64 * s);
        int64_t live = mem_stat(DEFT_MEM_LIVE_BYTES) - base;
        if (live > highest) highest = live;
    }
    ck_assert_msg(highest <= (4 << 20) + 2 * (65536 + 64 * 100) * 8,
                  "the backward plans kept %lld bytes of arenas", (long long)highest);
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), base);
    backward_of_shape(65536); /* evicted long ago */
    backward_of_shape(65536 + 64 * 99);
    ck_assert_ok(DeftMemoryReleaseCached(DEFT_CPU, 0));
    ck_assert_int_eq(mem_stat(DEFT_MEM_LIVE_BYTES), base);
}
END_TEST

Suite *autograd_suite(void) {
    Suite *s = suite_create("autograd");
    TCase *tc = tcase_create("gradients");
    tcase_add_test(tc, backward_writes_gradients);
    tcase_add_test(tc, grad_req_add_accumulates);
    tcase_add_test(tc, head_gradients_and_shapes);
    tcase_add_test(tc, compute_gradient_returns_arrays);
    tcase_add_test(tc, second_derivative);
    tcase_add_test(tc, second_derivative_through_a_reduction);
    tcase_add_test(tc, create_graph_into_a_variable_leaks_nothing);
    tcase_add_test(tc, retain_graph);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, saved_value_overwritten);
    tcase_add_test(tc, gradient_memory_must_not_overlap);
    tcase_add_test(tc, backward_plan_is_reused);
    tcase_add_test(tc, backward_plan_hits_and_misses);
    tcase_add_test(tc, backward_matches_seen_shapes);
    tcase_add_test(tc, backward_match_tells_leaves_apart);
    tcase_add_test(tc, deferred_and_autograd_together);
    tcase_add_test(tc, executor_call_is_one_node);
    tcase_add_test(tc, gradient_through_exported_graph);
    tcase_add_test(tc, random_inside_a_cached_graph);
    suite_add_tcase(s, tc);
    TCase *mem = tcase_create("memory");
    tcase_set_timeout(mem, 300);
    tcase_add_test(mem, nodes_keep_what_their_gradient_reads);
    tcase_add_test(mem, sum_and_exp_keep_little);
    tcase_add_test(mem, million_imperative);
    tcase_add_test(mem, million_deferred);
    tcase_add_test(mem, million_recording);
    tcase_add_test(mem, backward_through_300_recorded_calls);
    tcase_add_test(mem, backward_through_2000_recorded_calls);
    tcase_add_test(mem, backward_plan_cache_is_bounded_and_released);
    suite_add_tcase(s, mem);
    return s;
}

int main(void) {
    /* A small bound on the backward plans' arenas, which the cache test checks. */
    setenv("DEFT_PLAN_CACHE_BYTES", "4194304", 1);
    return run_suite(autograd_suite());
}
