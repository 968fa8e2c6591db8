/* Device placement: copies exactly where edges cross devices, forward and backward. */
#include <cjson/cJSON.h>

#include "symbol_helpers.h"

/* apply(), in a ctx_group when one is named. */
static DeftSymbolHandle apply_in(const char *op, const char *name, const char *group, int nin,
                                 DeftSymbolHandle *in, const char *const *params) {
    DeftSymbolHandle s = apply(op, name, nin, in, params);
    if (group) ck_assert_ok(DeftSymbolSetAttr(s, "ctx_group", group));
    return s;
}

static const char *device_of(const cJSON *node) {
    const cJSON *attrs = cJSON_GetObjectItem(node, "attrs");
    const cJSON *d = attrs ? cJSON_GetObjectItem(attrs, "__device__") : NULL;
    return d ? d->valuestring : NULL;
}

/* Check the placement invariants on the saved graph; returns the number of copies. */
static int check_placement(DeftSymbolHandle placed) {
    const char *text;
    ck_assert_ok(DeftSymbolSaveToJSON(placed, &text));
    cJSON *root = cJSON_Parse(text);
    ck_assert_ptr_nonnull(root);
    const cJSON *nodes = cJSON_GetObjectItem(root, "nodes");
    int n = cJSON_GetArraySize(nodes), copies = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *node = cJSON_GetArrayItem(nodes, i);
        const char *op = cJSON_GetObjectItem(node, "op")->valuestring, *dev = device_of(node);
        ck_assert_msg(dev != NULL, "node %d has no device", i);
        bool is_copy = strcmp(op, "_copy_to_device") == 0;
        copies += is_copy;
        const cJSON *inputs = cJSON_GetObjectItem(node, "inputs");
        for (int k = 0; k < cJSON_GetArraySize(inputs); k++) {
            int src = cJSON_GetArrayItem(cJSON_GetArrayItem(inputs, k), 0)->valueint;
            const char *src_dev = device_of(cJSON_GetArrayItem(nodes, src));
            if (is_copy)
                ck_assert_msg(strcmp(src_dev, dev) != 0, "copy %d copies within %s", i, dev);
            else
                ck_assert_msg(strcmp(src_dev, dev) == 0, "node %d (%s on %s) reads node %d on %s",
                              i, op, dev, src, src_dev);
        }
        /* one copy per value and destination */
        for (int j = 0; is_copy && j < i; j++) {
            const cJSON *other = cJSON_GetArrayItem(nodes, j);
            if (strcmp(cJSON_GetObjectItem(other, "op")->valuestring, "_copy_to_device")) continue;
            char *a = cJSON_PrintUnformatted(cJSON_GetObjectItem(node, "inputs"));
            char *b = cJSON_PrintUnformatted(cJSON_GetObjectItem(other, "inputs"));
            ck_assert_msg(strcmp(a, b) || strcmp(dev, device_of(other)), "copies %d and %d repeat",
                          i, j);
            free(a), free(b);
        }
    }
    cJSON_Delete(root);
    return copies;
}

START_TEST(test_copies_on_crossing_edges_forward_and_backward) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle fc1 = apply_in("FullyConnected", "fc1", "a", 1, &x, P("num_hidden", "4"));
    DeftSymbolHandle act = apply_in("Activation", "act", "b", 1, &fc1, P("act_type", "tanh"));
    DeftSymbolHandle fc2 = apply_in("FullyConnected", "fc2", "b", 1, &act, P("num_hidden", "3"));
    const char *groups[2] = {"a", "b"};
    const int types[2] = {DEFT_CPU, DEFT_CPU}, ids[2] = {0, 1};
    DeftSymbolHandle placed, grad, placed_grad;
    ck_assert_ok(DeftSymbolPlaceDevice(fc2, DEFT_CPU, 0, 2, groups, types, ids, &placed));
    ck_assert_int_eq(check_placement(placed), 1); /* fc1 (cpu 0) -> act (cpu 1) */
    ck_assert_ok(
        DeftSymbolGradient(fc2, 2, (const char *const[]){"fc1_weight", "fc2_weight"}, &grad));
    ck_assert_ok(DeftSymbolPlaceDevice(grad, DEFT_CPU, 0, 2, groups, types, ids, &placed_grad));
    /* forward a -> b, and the gradient flowing back b -> a */
    ck_assert_int_eq(check_placement(placed_grad), 2);

    /* placement changes no value */
    DeftCachedOpHandle plain, moved;
    ck_assert_ok(DeftCachedOpCreate(grad, 0, &plain));
    ck_assert_ok(DeftCachedOpCreate(placed_grad, 0, &moved));
    int nargs;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(grad, &nargs, &names));
    DeftNDArrayHandle args[8];
    ck_assert_ok(DeftRandomSeed(11));
    for (int a = 0; a < nargs; a++) {
        const char *shape = !strcmp(names[a], "x")            ? "(2,5)"
                            : !strcmp(names[a], "fc1_weight") ? "(4,5)"
                            : !strcmp(names[a], "fc1_bias")   ? "(4,)"
                            : !strcmp(names[a], "fc2_weight") ? "(3,4)"
                            : !strcmp(names[a], "fc2_bias")   ? "(3,)"
                                                              : "(2,3)";
        args[a] = call1("_random_normal", 0, NULL, P("shape", shape));
    }
    DeftNDArrayHandle r1[3] = {NULL}, r2[3] = {NULL};
    int n1 = 3, n2 = 3;
    ck_assert_ok(DeftCachedOpInvoke(plain, nargs, args, &n1, r1));
    ck_assert_msg(DeftCachedOpInvoke(moved, nargs, args, &n2, r2) == 0, "%s", DeftGetLastError());
    for (int k = 0; k < 3; k++) {
        int64_t na, nb;
        double *va = read_all(r1[k], &na), *vb = read_all(r2[k], &nb);
        ck_assert_int_eq(na, nb);
        for (int64_t i = 0; i < na; i++) ck_assert_double_eq(va[i], vb[i]);
        free(va), free(vb);
    }
    free_all(nargs, args);
    free_all(3, r1);
    free_all(3, r2);
    ck_assert_ok(DeftCachedOpFree(plain));
    ck_assert_ok(DeftCachedOpFree(moved));
    DeftSymbolHandle all[] = {x, fc1, act, fc2, placed, grad, placed_grad};
    for (int i = 0; i < 7; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

START_TEST(test_placement_errors) {
    DeftSymbolHandle x = var("x"), out = NULL;
    DeftSymbolHandle e = apply_in("exp", "e", "nowhere", 1, &x, NO_PARAMS);
    ck_assert_fails(DeftSymbolPlaceDevice(e, DEFT_CPU, 0, 0, NULL, NULL, NULL, &out),
                    DEFT_ERROR_VALUE, "ctx_group 'nowhere' has no device in the placement");
    ck_assert_ok(DeftSymbolSetAttr(x, "__device__", "tpu(0)"));
    ck_assert_fails(DeftSymbolPlaceDevice(x, DEFT_CPU, 0, 0, NULL, NULL, NULL, &out),
                    DEFT_ERROR_PARSE,
                    "parameter '__device__' is 'tpu(0)', expected a device such as cpu(0)");
    ck_assert_fails(DeftSymbolPlaceDevice(e, 9, 0, 0, NULL, NULL, NULL, &out), DEFT_ERROR_VALUE,
                    "the default device (9, 0) is not a device");
    ck_assert_ptr_null(out);
    ck_assert_ok(DeftSymbolFree(x));
    ck_assert_ok(DeftSymbolFree(e));
}
END_TEST

/* The named passes: "Gradient,PlaceDevice" places forward and backward by
 * the nodes' own "__device__" attributes. */
START_TEST(test_named_passes) {
    DeftSymbolHandle x = var("x"), placed;
    DeftSymbolHandle e = apply_in("exp", "e", NULL, 1, &x, NO_PARAMS);
    ck_assert_ok(DeftSymbolSetAttr(e, "__device__", "cpu(1)"));
    DeftSymbolHandle t = apply_in("tanh", "t", NULL, 1, &e, NO_PARAMS);
    ck_assert_ok(DeftSymbolApplyPasses(t, "Gradient,PlaceDevice", &placed));
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListOutputs(placed, &n, &names));
    ck_assert_int_eq(n, 2); /* t, then d t / d x */
    /* x follows its reader to cpu(1); e -> t crosses forward, and the gradient
     * crosses back from tanh's backward (cpu(0)) to exp's (cpu(1)) */
    ck_assert_int_eq(check_placement(placed), 2);
    DeftSymbolHandle all[] = {x, e, t, placed};
    for (int i = 0; i < 4; i++) ck_assert_ok(DeftSymbolFree(all[i]));
}
END_TEST

static Suite *placement_suite(void) {
    Suite *suite = suite_create("device placement");
    TCase *tc = tcase_create("placement");
    tcase_add_test(tc, test_copies_on_crossing_edges_forward_and_backward);
    tcase_add_test(tc, test_placement_errors);
    tcase_add_test(tc, test_named_passes);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(placement_suite());
}
