#define _POSIX_C_SOURCE 200809L
/* Independent branches of a graph run on two cores (core/graph/branches.h). */
#include "symbol_helpers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "capi/src/handle.h"
#include "core/base/error.h"
#include "core/graph/executor.h"
#include "core/op/op.h"
#include "core/op/registry.h"

/* ---- a probe: which thread ran it, in which mode, and it may fail ---- */

#define PROBE_FAILS 99 /* a probe whose input starts with this fails */

static pthread_t probe_thread[2];
static atomic_int probe_training[2];
static atomic_int probe_calls;

static int probe_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op, (void)p, (void)nin;
    out[0] = in[0];
    *nout = 1;
    return 0;
}

/* Copies its input, after noting where it ran (slot: the input's first value) and a pause
 * long enough for a helper to take the other half of a pair. */
static int probe_forward(const deft_op_t *op, const deft_param_value_t *p, int nin,
                         const deft_tensor_t *in, int nout, const deft_tensor_t *out) {
    (void)op, (void)p, (void)nin, (void)nout;
    const float *x = deft_tensor_data(&in[0]);
    if (x[0] == PROBE_FAILS) return deft_error(DEFT_ERR_VALUE, "the probe fails on purpose");
    int slot = x[0] != 0;
    atomic_fetch_add(&probe_calls, 1);
    probe_thread[slot] = pthread_self();
    atomic_store(&probe_training[slot], deft_op_training());
    nanosleep(&(struct timespec){0, 5000000}, NULL);
    memcpy(deft_tensor_data(&out[0]), x, deft_tensor_nbytes(&in[0]));
    return 0;
}

static const deft_op_t probe_ops[] = {{.name = "_test_branch_probe",
                                       .description = "notes its thread; copies its input",
                                       .min_inputs = 1,
                                       .max_inputs = 1,
                                       .infer = probe_infer,
                                       .forward = probe_forward,
                                       .inplace_input = -1}};
DEFT_OP_FAMILY(deft_family_test_branch_probe, probe_ops);

/* ---- helpers ---- */

/* An executor of sym made while DEFT_BRANCH_NS is `ns` (NULL: unset). */
static DeftCachedOpHandle executor_with(DeftSymbolHandle sym, int flags, const char *ns) {
    if (ns)
        setenv("DEFT_BRANCH_NS", ns, 1);
    else
        unsetenv("DEFT_BRANCH_NS");
    DeftCachedOpHandle op;
    ck_assert_msg(DeftCachedOpCreate(sym, flags, &op) == 0, "%s", DeftGetLastError());
    unsetenv("DEFT_BRANCH_NS");
    return op;
}

static deft_branch_stat_t stat_of(DeftCachedOpHandle handle) {
    void *op;
    ck_assert_ok(deft_handle_get(handle, DEFT_HANDLE_CACHED_OP, "op", &op));
    deft_branch_stat_t s;
    deft_cached_op_branch_stat(op, &s);
    return s;
}

/* Run op on `in`; its outputs (up to 8) into out, waited for. 0, or -1 with the error set. */
static int run_all(DeftCachedOpHandle op, int nin, DeftNDArrayHandle *in, int nout,
                   DeftNDArrayHandle *out) {
    for (int o = 0; o < nout; o++) out[o] = NULL;
    int room = nout;
    if (DeftCachedOpInvoke(op, nin, in, &room, out)) return -1;
    ck_assert_int_eq(room, nout);
    int status = 0;
    for (int o = 0; o < nout; o++) status |= DeftNDArrayWaitToRead(out[o]);
    return status ? -1 : 0;
}

static void free_symbols(int n, DeftSymbolHandle *s) {
    for (int i = 0; i < n; i++) ck_assert_ok(DeftSymbolFree(s[i]));
}

static bool same_values(DeftNDArrayHandle a, DeftNDArrayHandle b) {
    int64_t na, nb;
    double *va = read_all(a, &na), *vb = read_all(b, &nb);
    bool same = na == nb;
    for (int64_t i = 0; same && i < na; i++) same = va[i] == vb[i];
    free(va), free(vb);
    return same;
}

/* ---- tests ---- */

/* Two probes on separate inputs are a pair: after the timed runs they run at once, the
 * second on a helper with the caller's training flag, and the sum is unchanged. */
START_TEST(test_independent_nodes_run_at_once_with_the_callers_mode) {
    DeftSymbolHandle a = var("a"), b = var("b");
    DeftSymbolHandle pa = apply("_test_branch_probe", "pa", 1, &a, NO_PARAMS);
    DeftSymbolHandle pb = apply("_test_branch_probe", "pb", 1, &b, NO_PARAMS);
    DeftSymbolHandle sum = apply("elemwise_add", "sum", 2, (DeftSymbolHandle[]){pa, pb}, NO_PARAMS);
    DeftCachedOpHandle op = executor_with(sum, 0, "0");
    DeftNDArrayHandle in[2] = {make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(0, 2, 3)),
                               make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 5, 7))};
    int was;
    ck_assert_ok(DeftAutogradSetIsTraining(1, &was));
    int apart = 0;
    atomic_store(&probe_calls, 0);
    for (int run = 0; run < 16; run++) {
        DeftNDArrayHandle y;
        ck_assert_msg(run_all(op, 2, in, 1, &y) == 0, "%s", DeftGetLastError());
        assert_values(y, 3, VALUES(1, 7, 10), 0);
        ck_assert_int_eq(atomic_load(&probe_training[0]), 1);
        ck_assert_int_eq(atomic_load(&probe_training[1]), 1);
        apart += !pthread_equal(probe_thread[0], probe_thread[1]);
        ck_assert_ok(DeftNDArrayFree(y));
    }
    ck_assert_ok(DeftAutogradSetIsTraining(was, NULL));
    deft_branch_stat_t s = stat_of(op);
    ck_assert_int_eq(s.timed_runs, DEFT_BRANCH_TIMED_RUNS);
    ck_assert_int_eq(s.pairs, 1);
    ck_assert_int_ge(s.paired_runs, 16 - DEFT_BRANCH_LEARNING_RUNS); /* the runs after */
    ck_assert_msg(apart > 0, "the probes of a pair never ran on two threads");
    ck_assert_int_eq(atomic_load(&probe_calls), 2 * 16); /* each once a run */
    free_all(2, in);
    ck_assert_ok(DeftCachedOpFree(op));
    free_symbols(5, (DeftSymbolHandle[]){a, b, pa, pb, sum});
}
END_TEST

/* The half of a pair that runs on a helper fails as it would alone: the same error. */
START_TEST(test_a_failing_branch_reports_its_own_error) {
    DeftSymbolHandle a = var("a"), b = var("b");
    DeftSymbolHandle pa = apply("_test_branch_probe", "pa", 1, &a, NO_PARAMS);
    DeftSymbolHandle pb = apply("_test_branch_probe", "pb", 1, &b, NO_PARAMS);
    DeftSymbolHandle sum = apply("elemwise_add", "sum", 2, (DeftSymbolHandle[]){pa, pb}, NO_PARAMS);
    char message[2][DEFT_ERROR_MAX];
    for (int paired = 0; paired < 2; paired++) {
        DeftCachedOpHandle op = executor_with(sum, 0, paired ? "0" : "-1");
        DeftNDArrayHandle in[2] = {make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(0, 1)),
                                   make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(1, 1))};
        for (int run = 0; run < DEFT_BRANCH_LEARNING_RUNS; run++) {
            DeftNDArrayHandle y;
            ck_assert_msg(run_all(op, 2, in, 1, &y) == 0, "%s", DeftGetLastError());
            ck_assert_ok(DeftNDArrayFree(y));
        }
        ck_assert_int_eq(stat_of(op).pairs, paired);
        set_values(in[1], 2, VALUES(PROBE_FAILS, 1));
        DeftNDArrayHandle y;
        ck_assert_int_eq(run_all(op, 2, in, 1, &y), -1);
        snprintf(message[paired], sizeof message[paired], "%s", DeftGetLastError());
        ck_assert_msg(strstr(message[paired], "the probe fails on purpose"), "%s", message[paired]);
        ck_assert_ok(DeftNDArrayFree(y));
        free_all(2, in);
        ck_assert_ok(DeftCachedOpFree(op));
    }
    ck_assert_str_eq(message[1], message[0]);
    free_symbols(5, (DeftSymbolHandle[]){a, b, pa, pb, sum});
}
END_TEST

/* Pairs only where the order cannot matter or the gain is real: not a chain, not an update in
 * place (the momentum), not random numbers, not kernels that split their own work. */
START_TEST(test_no_pair_where_order_or_a_split_matters) {
    DeftSymbolHandle x = var("x"), w = var("w"), g = var("g"), mom = var("mom");
    DeftSymbolHandle e = apply("exp", "e", 1, &x, NO_PARAMS);
    DeftSymbolHandle chain = apply("sin", "chain", 1, &e, NO_PARAMS);
    DeftSymbolHandle step = apply("sgd_mom_update", "step", 3, (DeftSymbolHandle[]){w, g, mom},
                                  P("lr", "0.1", "momentum", "0.9"));
    DeftSymbolHandle noise = apply("_random_uniform", "noise", 0, NULL, P("shape", "(4,)"));
    DeftSymbolHandle big_x = var("big_x"), big_e = apply("exp", "big_e", 1, &big_x, NO_PARAMS);
    DeftSymbolHandle big_s = apply("sin", "big_s", 1, &big_x, NO_PARAMS);
    struct {
        const char *what;
        int n;
        DeftSymbolHandle out[2];
    } cases[] = {{"a chain", 1, {chain}},
                 {"an update in place", 2, {e, step}},
                 {"random numbers", 2, {e, noise}},
                 {"kernels that split", 2, {big_e, big_s}}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        DeftSymbolHandle group;
        ck_assert_ok(DeftSymbolCreateGroup(cases[c].n, cases[c].out, &group));
        DeftCachedOpHandle op = executor_with(group, 0, "0");
        int nargs, naux;
        const char *const *names, *const *aux;
        ck_assert_ok(DeftSymbolListArguments(group, &nargs, &names));
        DeftNDArrayHandle in[4], out[2];
        for (int i = 0; i < nargs; i++) {
            bool big = strcmp(names[i], "big_x") == 0;
            in[i] = call1("_random_uniform", 0, NULL, P("shape", big ? "(2097152,)" : "(4,)"));
        }
        ck_assert_ok(DeftSymbolListAuxiliaryStates(group, &naux, &aux));
        for (int i = 0; i < naux; i++) /* the momentum */
            in[nargs++] = call1("_random_uniform", 0, NULL, P("shape", "(4,)"));
        for (int run = 0; run < DEFT_BRANCH_LEARNING_RUNS + 1; run++) {
            ck_assert_msg(run_all(op, nargs, in, cases[c].n, out) == 0, "%s", DeftGetLastError());
            free_all(cases[c].n, out);
        }
        deft_branch_stat_t s = stat_of(op);
        ck_assert_msg(s.timed_runs == DEFT_BRANCH_TIMED_RUNS && s.pairs == 0,
                      "%s: %d timed runs, %d pairs", cases[c].what, s.timed_runs, s.pairs);
        free_all(nargs, in);
        ck_assert_ok(DeftCachedOpFree(op));
        ck_assert_ok(DeftSymbolFree(group));
    }
    free_symbols(11,
                 (DeftSymbolHandle[]){x, w, g, mom, e, chain, step, noise, big_x, big_e, big_s});
}
END_TEST

/* Two chains side by side pair step by step: each node of one with its peer of the other. */
START_TEST(test_two_chains_pair_step_by_step) {
    DeftSymbolHandle syms[10];
    int ns = 0;
    for (int c = 0; c < 2; c++) {
        DeftSymbolHandle h = syms[ns++] = var(c ? "y" : "x");
        const char *ops[] = {"exp", "sin", "cos"};
        for (int k = 0; k < 3; k++) h = syms[ns++] = apply(ops[k], NULL, 1, &h, NO_PARAMS);
    }
    DeftSymbolHandle sum =
        apply("elemwise_add", "sum", 2, (DeftSymbolHandle[]){syms[3], syms[7]}, NO_PARAMS);
    DeftCachedOpHandle ops[2] = {executor_with(sum, 0, "-1"), executor_with(sum, 0, "0")};
    DeftNDArrayHandle in[2], out[2];
    for (int i = 0; i < 2; i++) in[i] = call1("_random_normal", 0, NULL, P("shape", "(512,)"));
    for (int run = 0; run < DEFT_BRANCH_LEARNING_RUNS + 1; run++)
        for (int k = 0; k < 2; k++) {
            if (run) ck_assert_ok(DeftNDArrayFree(out[k]));
            ck_assert_msg(run_all(ops[k], 2, in, 1, &out[k]) == 0, "%s", DeftGetLastError());
        }
    ck_assert_int_eq(stat_of(ops[1]).pairs, 3);
    ck_assert_int_ge(stat_of(ops[1]).paired_runs, 3);
    ck_assert(same_values(out[0], out[1]));
    for (int k = 0; k < 2; k++) {
        ck_assert_ok(DeftNDArrayFree(out[k]));
        ck_assert_ok(DeftCachedOpFree(ops[k]));
    }
    free_all(2, in);
    free_symbols(ns, syms);
    ck_assert_ok(DeftSymbolFree(sum));
}
END_TEST

/* A training graph (two layers, their gradients) paired wherever it can be gives the same
 * numbers as run in order, bit for bit. */
START_TEST(test_paired_gradients_equal_the_ordered_ones) {
    DeftSymbolHandle x = var("x"), h = x, syms[8];
    int ns = 0;
    for (int l = 0; l < 2; l++) {
        DeftSymbolHandle fc =
            apply("FullyConnected", l ? "fc1" : "fc0", 1, &h, P("num_hidden", l ? "4" : "24"));
        h = apply("Activation", NULL, 1, &fc, P("act_type", "relu"));
        syms[ns++] = fc, syms[ns++] = h;
    }
    DeftCachedOpHandle ops[2] = {executor_with(h, DEFT_CACHED_OP_BACKWARD, "-1"),
                                 executor_with(h, DEFT_CACHED_OP_BACKWARD, "0")};
    ck_assert_ok(DeftRandomSeed(3));
    const char *shapes[] = {"(16,40)", "(24,40)", "(24,)", "(4,24)", "(4,)", "(16,4)"};
    DeftNDArrayHandle in[6], out[2][6];
    for (int i = 0; i < 6; i++) in[i] = call1("_random_normal", 0, NULL, P("shape", shapes[i]));
    for (int run = 0; run < DEFT_BRANCH_LEARNING_RUNS + 2; run++)
        for (int k = 0; k < 2; k++) {
            if (run) free_all(6, out[k]);
            ck_assert_msg(run_all(ops[k], 6, in, 6, out[k]) == 0, "%s", DeftGetLastError());
        }
    ck_assert_int_ge(stat_of(ops[1]).pairs, 1);
    ck_assert_int_ge(stat_of(ops[1]).paired_runs, 1);
    for (int o = 0; o < 6; o++)
        ck_assert_msg(same_values(out[0][o], out[1][o]), "output %d differs when paired", o);
    for (int k = 0; k < 2; k++) {
        free_all(6, out[k]);
        ck_assert_ok(DeftCachedOpFree(ops[k]));
    }
    free_all(6, in);
    free_symbols(ns, syms);
    ck_assert_ok(DeftSymbolFree(x));
}
END_TEST

/* The memory check: the later node of a pair may write no byte that the earlier one, or a
 * node between them, reads or writes; the earlier may write none the later reads. */
START_TEST(test_the_memory_check_refuses_shared_bytes) {
    DeftSymbolHandle x = var("x"), y = var("y");
    DeftSymbolHandle e = apply("exp", "e", 1, &x, NO_PARAMS);
    DeftSymbolHandle n = apply("negative", "n", 1, &e, NO_PARAMS);
    DeftSymbolHandle s = apply("sin", "s", 1, &y, NO_PARAMS);
    DeftSymbolHandle group;
    ck_assert_ok(DeftSymbolCreateGroup(2, (DeftSymbolHandle[]){n, s}, &group));
    DeftCachedOpHandle handle = executor_with(group, 0, "0");
    void *op;
    ck_assert_ok(deft_handle_get(handle, DEFT_HANDLE_CACHED_OP, "op", &op));
    const deft_graph_t *g = deft_cached_op_graph(op);
    int id[5] = {-1, -1, -1, -1, -1}; /* x, y, e, n, s */
    const char *names[5] = {"x", "y", "e", "n", "s"};
    for (int i = 0; i < g->num_nodes; i++)
        for (int k = 0; k < 5; k++)
            if (strcmp(deft_graph_name(g, i), names[k]) == 0) id[k] = i;
    for (int k = 0; k < 5; k++) ck_assert_msg(id[k] >= 0, "no node %s", names[k]);
    int i = id[2] < id[4] ? id[2] : id[4], j = id[2] < id[4] ? id[4] : id[2];
    bool between = i < id[3] && id[3] < j; /* n runs between the two halves */
    /* Each entry four floats in one buffer of 8 slots: slot[e] is entry e's place. */
    float buffer[8][4];
    deft_storage_t storage = {0};
    storage.data = buffer;
    deft_tensor_t t[8];
    int slot[8];
    deft_branches_t *b = deft_branches_new(g);
    ck_assert_ptr_nonnull(b);
    unsigned char ran[8] = {0}; /* x and y are variables: nothing has run */
    ck_assert_int_le(g->num_nodes, 8);
    for (int layout = 0; layout < 4; layout++) {
        for (int e = 0; e < g->row_ptr[g->num_nodes]; e++) slot[e] = e;
        int out_j = g->row_ptr[j], out_i = g->row_ptr[i], in_j = deft_graph_input_entry(g, j, 0);
        if (layout == 1) slot[out_j] = slot[deft_graph_input_entry(g, i, 0)]; /* j over i's input */
        if (layout == 2) slot[out_i] = slot[in_j];                            /* i over j's input */
        if (layout == 3)
            slot[out_j] = slot[between ? g->row_ptr[id[3]] : out_i]; /* j over n or i */
        for (int e = 0; e < g->row_ptr[g->num_nodes]; e++)
            t[e] = (deft_tensor_t){{1, {4}},
                                   DEFT_DT_FLOAT32,
                                   deft_device_cpu(),
                                   &storage,
                                   (size_t)slot[e] * sizeof buffer[0]};
        ck_assert_msg(deft_branches_ready(b, g, t, i, j, ran) == (layout == 0), "layout %d",
                      layout);
    }
    /* n reads what e makes: never at once, whatever the bytes */
    ck_assert(!deft_branches_ready(b, g, t, id[2], id[3], ran));
    /* apart in memory, but an input of one on a GPU: its kernel belongs to its thread's stream */
    for (int e = 0; e < g->row_ptr[g->num_nodes]; e++)
        t[e] = (deft_tensor_t){
            {1, {4}}, DEFT_DT_FLOAT32, deft_device_cpu(), &storage, (size_t)e * sizeof buffer[0]};
    ck_assert(deft_branches_ready(b, g, t, i, j, ran));
    t[deft_graph_input_entry(g, j, 0)].device = (deft_device_t){DEFT_DEV_GPU, 0};
    ck_assert(!deft_branches_ready(b, g, t, i, j, ran));
    deft_branches_free(b);
    ck_assert_ok(DeftCachedOpFree(handle));
    free_symbols(6, (DeftSymbolHandle[]){x, y, e, n, s, group});
}
END_TEST

static Suite *branches_suite(void) {
    Suite *suite = suite_create("branches");
    TCase *tc = tcase_create("branches");
    tcase_add_test(tc, test_independent_nodes_run_at_once_with_the_callers_mode);
    tcase_add_test(tc, test_a_failing_branch_reports_its_own_error);
    tcase_add_test(tc, test_no_pair_where_order_or_a_split_matters);
    tcase_add_test(tc, test_two_chains_pair_step_by_step);
    tcase_add_test(tc, test_paired_gradients_equal_the_ordered_ones);
    tcase_add_test(tc, test_the_memory_check_refuses_shared_bytes);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    /* Pairs need two threads, whatever the machine has. */
    setenv("DEFT_NUM_THREADS", "2", 1);
    return run_suite(branches_suite());
}
