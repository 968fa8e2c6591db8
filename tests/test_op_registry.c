/* The operator registry, introspection, parameter parsing and invoke's error paths. */
#include "core/op/registry.h"
#include "op_helpers.h"

/* Before any executor registers a graph (this suite makes none), a
 * _CachedOp names nothing: a value error, not an internal one. */
START_TEST(test_cached_op_naming_no_graph_is_a_value_error) {
    DeftSymbolHandle atomic, x;
    ck_assert_ok(DeftSymbolCreateVariable("x", &x));
    ck_assert_ok(DeftSymbolCreateAtomic(op_named("_CachedOp"), 1, (const char *[]){"subgraph"},
                                        (const char *[]){"sg0"}, &atomic));
    ck_assert_fails(DeftSymbolCompose(atomic, NULL, 1, NULL, &x), DEFT_ERROR_VALUE,
                    "operator '_CachedOp': no graph is registered as 'sg0'");
    ck_assert_ok(DeftSymbolFree(atomic));
    ck_assert_ok(DeftSymbolFree(x));
}
END_TEST

/* Each alias names an operator of the tables, is no operator's own name, and
 * finds that very operator. */
START_TEST(test_aliases_find_their_operators) {
    for (int a = 0; deft_op_aliases[a].alias; a++) {
        const deft_op_alias_t *al = &deft_op_aliases[a];
        const deft_op_entry_t *named = deft_registry_find(al->name);
        const deft_op_entry_t *aliased = deft_registry_find(al->alias);
        ck_assert_msg(named && named->op && !strcmp(named->op->name, al->name),
                      "alias '%s' names '%s', which is no operator", al->alias, al->name);
        ck_assert_msg(aliased && aliased->op == named->op, "'%s' does not find '%s'", al->alias,
                      al->name);
        ck_assert_msg(strcmp(aliased->op->name, al->alias) != 0, "'%s' is an operator's own name",
                      al->alias);
        ck_assert_str_eq(aliased->name, al->alias);
    }
    /* called by an alias, an operator computes as itself */
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle y = call1("_Plus", 2, (DeftNDArrayHandle[]){x, x}, NO_PARAMS);
    assert_values(y, 4, VALUES(2, 4, 6, 8), 0);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

/* Input names past an operator's list are the first name, never a read past it
 * (_backward_RNN takes up to 10 inputs and names 5; ASan caught the over-read). */
START_TEST(test_input_names_past_the_list) {
    const deft_op_t *rnn = deft_registry_find("_backward_RNN")->op;
    ck_assert_str_eq(deft_op_input_name(rnn, 1), "parameters");
    ck_assert_str_eq(deft_op_input_name(rnn, 9), "data");
    const deft_op_t *concat = deft_registry_find("Concat")->op;
    ck_assert_str_eq(deft_op_input_name(concat, 30), "data");
    ck_assert_ptr_null(deft_op_input_name(deft_registry_find("_zeros")->op, 0));
}
END_TEST

START_TEST(test_lists_sorted_operators_including_mxnet_names) {
    int count = 0;
    const char *const *names = NULL;
    ck_assert_ok(DeftListOperators(&count, &names));
    ck_assert_int_gt(count, 80);
    for (int i = 1; i < count; i++) ck_assert_int_lt(strcmp(names[i - 1], names[i]), 0);
    static const char *const required[] = {"FullyConnected",
                                           "Activation",
                                           "dot",
                                           "batch_dot",
                                           "broadcast_add",
                                           "_plus_scalar",
                                           "softmax",
                                           "log_softmax",
                                           "sum",
                                           "mean",
                                           "max",
                                           "min",
                                           "prod",
                                           "argmax",
                                           "argmin",
                                           "norm",
                                           "Reshape",
                                           "Flatten",
                                           "transpose",
                                           "Concat",
                                           "stack",
                                           "split",
                                           "slice",
                                           "slice_axis",
                                           "expand_dims",
                                           "squeeze",
                                           "broadcast_to",
                                           "take",
                                           "one_hot",
                                           "where",
                                           "clip",
                                           "Cast",
                                           "softmax_cross_entropy",
                                           "sgd_update",
                                           "sgd_mom_update",
                                           "adam_update",
                                           "_copyto",
                                           "_zeros",
                                           "_ones",
                                           "_full",
                                           "_arange",
                                           "_random_uniform",
                                           "_random_normal",
                                           "gelu",
                                           "erf",
                                           "softrelu",
                                           "rsqrt"};
    for (size_t r = 0; r < sizeof required / sizeof required[0]; r++) {
        bool found = false;
        for (int i = 0; i < count; i++) found = found || strcmp(names[i], required[r]) == 0;
        ck_assert_msg(found, "operator %s is missing", required[r]);
    }
}
END_TEST

START_TEST(test_every_default_parses_and_every_op_is_documented) {
    for (int i = 0; i < deft_registry_count(); i++) {
        const deft_op_entry_t *e = deft_registry_at(i);
        ck_assert_msg(e->op->description && strlen(e->op->description) > 5, "%s has no description",
                      e->op->name);
        ck_assert_msg(e->op->infer && e->op->forward, "%s lacks infer or forward", e->op->name);
        ck_assert_msg(e->op->min_inputs >= 0 && e->op->min_inputs <= e->op->max_inputs &&
                          e->op->max_inputs <= DEFT_OP_MAX_INPUTS,
                      "%s takes %d to %d inputs", e->op->name, e->op->min_inputs,
                      e->op->max_inputs);
        ck_assert_msg(e->num_params <= DEFT_OP_MAX_PARAMS, "%s has too many parameters",
                      e->op->name);
        for (int p = 0; p < e->num_params; p++) {
            const deft_param_def_t *def = &e->op->params[p];
            ck_assert_msg(def->doc && *def->doc, "%s.%s has no doc", e->op->name, def->name);
            deft_param_value_t v;
            if (def->default_value)
                ck_assert_msg(deft_param_parse(e->op, def, def->default_value, &v) == 0, "%s",
                              deft_error_message());
        }
    }
}
END_TEST

static int never_infer(const deft_op_t *op, const deft_param_value_t *p, int nin,
                       const deft_desc_t *in, int *nout, deft_desc_t *out) {
    (void)op, (void)p, (void)nin, (void)in, (void)nout, (void)out;
    return -1;
}

/* An operator added at run time that the per-node tables could not hold is refused. */
START_TEST(test_added_operators_are_checked) {
    static const deft_op_t wide = {.name = "test_wide",
                                   .min_inputs = 1,
                                   .max_inputs = 65,
                                   .infer = never_infer,
                                   .forward = deft_forward_copy};
    static const deft_op_t no_kernel = {
        .name = "test_no_kernel", .max_inputs = 1, .infer = never_infer};
    ck_assert_int_eq(deft_registry_add(&wide), -1);
    ck_assert_msg(strstr(deft_error_message(), "operator 'test_wide' takes 1 to 65 inputs"), "%s",
                  deft_error_message());
    ck_assert_int_eq(deft_registry_add(&no_kernel), -1);
    ck_assert_msg(strstr(deft_error_message(), "needs shape inference and a kernel"), "%s",
                  deft_error_message());
    ck_assert_ptr_null(deft_registry_find("test_wide"));
}
END_TEST

START_TEST(test_introspection_describes_fully_connected) {
    DeftOpHandle op = op_named("FullyConnected");
    const char *name, *desc, *type, *def, *doc;
    int min, max, nnames, nparams;
    const char *const *inputs;
    ck_assert_ok(DeftOpGetInfo(op, &name, &desc));
    ck_assert_str_eq(name, "FullyConnected");
    ck_assert_ok(DeftOpGetInputs(op, &min, &max, &nnames, &inputs));
    ck_assert_int_eq(min, 2);
    ck_assert_int_eq(max, 3);
    ck_assert_int_eq(nnames, 3);
    ck_assert_str_eq(inputs[1], "weight");
    ck_assert_ok(DeftOpGetNumParams(op, &nparams));
    ck_assert_int_eq(nparams, 3);
    ck_assert_ok(DeftOpGetParam(op, 0, &name, &type, &def, &doc));
    ck_assert_str_eq(name, "num_hidden");
    ck_assert_str_eq(type, "int");
    ck_assert_ptr_null(def);
    ck_assert_ok(DeftOpGetParam(op, 2, &name, &type, &def, &doc));
    ck_assert_str_eq(name, "flatten");
    ck_assert_str_eq(type, "boolean");
    ck_assert_str_eq(def, "true");

    int nwords;
    const char *const *words;
    ck_assert_ok(DeftOpGetParamChoices(op_named("Activation"), 0, &nwords, &words));
    ck_assert_int_eq(nwords, 5); /* relu, sigmoid, softrelu, tanh, softsign */
    ck_assert_str_eq(words[1], "sigmoid");
    ck_assert_ok(DeftOpGetParamChoices(op, 0, &nwords, &words));
    ck_assert_int_eq(nwords, 0);
}
END_TEST

START_TEST(test_introspection_rejects_bad_arguments) {
    DeftOpHandle op = op_named("dot"), out = NULL;
    const char *s = "untouched", *t, *d, *doc;
    int n = -5, m;
    const char *const *list;
    ck_assert_fails(DeftGetOperator("Dot", &out), DEFT_ERROR_VALUE,
                    "DeftGetOperator: unknown operator 'Dot' (did you mean 'dot'?)");
    ck_assert_fails(DeftGetOperator("no_such_thing_at_all", &out), DEFT_ERROR_VALUE,
                    "unknown operator 'no_such_thing_at_all'");
    ck_assert_fails(DeftGetOperator(NULL, &out), DEFT_ERROR_VALUE, "name is NULL");
    ck_assert_fails(DeftGetOperator("dot", NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_ptr_null(out);
    ck_assert_fails(DeftListOperators(NULL, &list), DEFT_ERROR_VALUE, "out_count is NULL");
    ck_assert_fails(DeftListOperators(&n, NULL), DEFT_ERROR_VALUE, "out_names is NULL");
    ck_assert_fails(DeftOpGetInfo(NULL, &s, &t), DEFT_ERROR_VALUE, "DeftOpGetInfo: op is NULL");
    ck_assert_fails(DeftOpGetInfo((DeftOpHandle)(void *)&n, &s, &t), DEFT_ERROR_VALUE,
                    "is not an operator handle");
    ck_assert_fails(DeftOpGetInfo(op, NULL, &t), DEFT_ERROR_VALUE, "out_name is NULL");
    ck_assert_fails(DeftOpGetInputs(op, &n, &m, &n, NULL), DEFT_ERROR_VALUE, "out_names is NULL");
    ck_assert_fails(DeftOpGetInputs(NULL, &n, &m, &n, &list), DEFT_ERROR_VALUE, "op is NULL");
    ck_assert_fails(DeftOpGetNumParams(op, NULL), DEFT_ERROR_VALUE, "out is NULL");
    ck_assert_fails(DeftOpGetNumParams(NULL, &n), DEFT_ERROR_VALUE, "op is NULL");
    ck_assert_fails(DeftOpGetParam(op, 2, &s, &t, &d, &doc), DEFT_ERROR_INDEX,
                    "index is 2, but 'dot' has 2 parameters");
    ck_assert_fails(DeftOpGetParam(op, -1, &s, &t, &d, &doc), DEFT_ERROR_INDEX, "index is -1");
    ck_assert_fails(DeftOpGetParam(op, 0, &s, &t, NULL, &doc), DEFT_ERROR_VALUE,
                    "out_default is NULL");
    ck_assert_fails(DeftOpGetParamChoices(op, 5, &n, &list), DEFT_ERROR_INDEX, "index is 5");
    ck_assert_fails(DeftOpGetParamChoices(op, 0, NULL, &list), DEFT_ERROR_VALUE,
                    "out_count is NULL");
    ck_assert_str_eq(s, "untouched");
    ck_assert_int_eq(n, -5);
}
END_TEST

START_TEST(test_invoke_reports_parameter_errors) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 3), NULL);
    ck_assert_call_fails("sum", 1, &x, P("axes", "0"), DEFT_ERROR_VALUE,
                         "DeftImperativeInvoke: operator 'sum': unknown parameter 'axes' "
                         "(parameters: axis, keepdims, exclude)");
    ck_assert_call_fails("sum", 1, &x, P("axis", "(0,x)"), DEFT_ERROR_PARSE,
                         "operator 'sum': parameter 'axis' is '(0,x)', expected a tuple of "
                         "integers");
    ck_assert_call_fails("sum", 1, &x, P("keepdims", "maybe"), DEFT_ERROR_PARSE,
                         "parameter 'keepdims' is 'maybe', expected true or false");
    ck_assert_call_fails("_plus_scalar", 1, &x, P("scalar", "1.5x"), DEFT_ERROR_PARSE,
                         "parameter 'scalar' is '1.5x', expected a number");
    ck_assert_call_fails("Activation", 1, &x, P("act_type", "swish"), DEFT_ERROR_PARSE,
                         "parameter 'act_type' is 'swish', expected one of: relu, sigmoid, "
                         "softrelu, tanh");
    ck_assert_call_fails("Activation", 1, &x, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'Activation': required parameter 'act_type' is missing");
    ck_assert_call_fails("sum", 1, &x, P("axis", "0", "axis", "1"), DEFT_ERROR_VALUE,
                         "parameter 'axis' is given twice");
    ck_assert_call_fails("Cast", 1, &x, P("dtype", "float128"), DEFT_ERROR_PARSE,
                         "parameter 'dtype' is 'float128', expected a dtype name");
    ck_assert_call_fails("transpose", 1, &x, P("axes", "(1,2,3,4,5,6,7,8,9)"), DEFT_ERROR_PARSE,
                         "parameter 'axes'");
    ck_assert_call_fails("_arange", 0, NULL, P("start", "9999999999999999999999"), DEFT_ERROR_VALUE,
                         "too many");
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

START_TEST(test_invoke_reports_input_errors) {
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 2, SHAPE(3, 4), NULL);
    DeftNDArrayHandle b = make(DEFT_FLOAT32, 2, SHAPE(3, 4), NULL);
    DeftNDArrayHandle d = make(DEFT_FLOAT64, 2, SHAPE(4, 2), NULL);
    DeftNDArrayHandle ab[2] = {a, b}, ad[2] = {a, d}, aa[3] = {a, a, a};
    ck_assert_call_fails("dot", 2, ab, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'dot': input 1 has shape (3,4), expected (4, ...) to match "
                         "input 0 of shape (3,4)");
    ck_assert_call_fails("dot", 2, ad, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 1 has dtype float64, expected float32 (the dtype of input 0)");
    ck_assert_call_fails("dot", 3, aa, NO_PARAMS, DEFT_ERROR_VALUE,
                         "operator 'dot': got 3 inputs, expected 2");
    ck_assert_call_fails("FullyConnected", 2, ab, P("num_hidden", "3"), DEFT_ERROR_VALUE,
                         "got 2 inputs, expected 3 (data, weight, bias)");
    ck_assert_call_fails("broadcast_add", 2, ad, NO_PARAMS, DEFT_ERROR_TYPE,
                         "input 1 has dtype float64");
    DeftNDArrayHandle bad[2] = {a, NULL};
    ck_assert_call_fails("broadcast_add", 2, bad, NO_PARAMS, DEFT_ERROR_VALUE,
                         "inputs[1] is NULL, expected an NDArray handle");
    ck_assert_ok(DeftNDArrayFree(b));
    DeftNDArrayHandle stale[2] = {a, b};
    ck_assert_call_fails("broadcast_add", 2, stale, NO_PARAMS, DEFT_ERROR_VALUE, "inputs[1] (0x");
    ck_assert_fails(
        DeftImperativeInvoke(NULL, 0, NULL, &(int){1}, (DeftNDArrayHandle[1]){0}, 0, NULL, NULL),
        DEFT_ERROR_VALUE, "op is NULL");
    ck_assert_fails(DeftImperativeInvoke(op_named("exp"), 1, &a, NULL, NULL, 0, NULL, NULL),
                    DEFT_ERROR_VALUE, "num_outputs is NULL");
    ck_assert_fails(DeftImperativeInvoke(op_named("exp"), 1, NULL, &(int){1},
                                         (DeftNDArrayHandle[1]){0}, 0, NULL, NULL),
                    DEFT_ERROR_VALUE, "num_inputs is 1 with inputs (nil)");
    ck_assert_fails(DeftImperativeInvoke(op_named("sum"), 1, &a, &(int){1},
                                         (DeftNDArrayHandle[1]){0}, 1, NULL, NULL),
                    DEFT_ERROR_VALUE, "num_params is 1 with keys (nil)");
    free_all(2, (DeftNDArrayHandle[]){a, d});
}
END_TEST

START_TEST(test_given_outputs_are_checked_and_written) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(1, 2, 3));
    DeftNDArrayHandle wrong = make(DEFT_FLOAT32, 1, SHAPE(4), NULL);
    DeftNDArrayHandle right = make(DEFT_FLOAT32, 1, SHAPE(3), NULL);
    DeftNDArrayHandle out[1] = {wrong};
    int nout = 1;
    ck_assert_fails(call("negative", 1, &x, &nout, out, NO_PARAMS), DEFT_ERROR_VALUE,
                    "output 0 has shape (4,) and dtype float32, expected (3,) float32");
    ck_assert_ptr_eq(out[0], wrong);
    out[0] = right;
    ck_assert_ok(call("negative", 1, &x, &nout, out, NO_PARAMS));
    ck_assert_ptr_eq(out[0], right);
    assert_values(right, 3, VALUES(-1, -2, -3), 0);
    nout = 0;
    out[0] = NULL;
    ck_assert_fails(call("negative", 1, &x, &nout, out, NO_PARAMS), DEFT_ERROR_VALUE,
                    "produces 1 outputs, but there is room for 0");
    ck_assert_int_eq(nout, 1); /* the room it needs, to call again */
    DeftNDArrayHandle parts[5] = {NULL};
    nout = 2;
    ck_assert_fails(call("split", 1, &x, &nout, parts, P("num_outputs", "3", "axis", "0")),
                    DEFT_ERROR_VALUE, "produces 3 outputs, but there is room for 2");
    ck_assert_int_eq(nout, 3);
    ck_assert_ptr_null(parts[0]);
    ck_assert_ok(call("split", 1, &x, &nout, parts, P("num_outputs", "3", "axis", "0")));
    ck_assert_int_eq(nout, 3);
    free_all(3, parts);
    parts[0] = parts[1] = parts[2] = NULL;
    nout = 5; /* any other failure leaves the count as it was */
    ck_assert_fails(call("split", 1, &x, &nout, parts, P("num_outputs", "2", "axis", "0")),
                    DEFT_ERROR_VALUE, "split");
    ck_assert_int_eq(nout, 5);
    /* writing into an input: in place where allowed, staged where not */
    out[0] = x;
    nout = 1;
    ck_assert_ok(call("_plus_scalar", 1, &x, &nout, out, P("scalar", "10")));
    assert_values(x, 3, VALUES(11, 12, 13), 0);
    DeftNDArrayHandle m = make(DEFT_FLOAT32, 2, SHAPE(2, 2), VALUES(1, 2, 3, 4));
    DeftNDArrayHandle mm[2] = {m, m};
    out[0] = m;
    ck_assert_ok(call("dot", 2, mm, &nout, out, NO_PARAMS));
    assert_values(m, 4, VALUES(7, 10, 15, 22), 0);
    free_all(4, (DeftNDArrayHandle[]){x, wrong, right, m});
}
END_TEST

/* The count is said plainly: not "got 1 inputs, expected 22". */
START_TEST(test_wrong_input_count_is_said_plainly) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 1, SHAPE(1), VALUES(1));
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    ck_assert_int_eq(call("elemwise_add", 1, &x, &nout, out, NO_PARAMS), -1);
    ck_assert_str_eq(DeftGetLastError(),
                     "DeftImperativeInvoke: operator 'elemwise_add': got 1 input, expected 2");
    ck_assert_int_eq(call("add_n", 0, NULL, &nout, out, NO_PARAMS), -1);
    ck_assert_str_eq(DeftGetLastError(),
                     "DeftImperativeInvoke: operator 'add_n': got 0 inputs, expected at least 1");
    free_all(1, &x);
}
END_TEST

START_TEST(test_failed_call_creates_and_changes_nothing) {
    int64_t before, after;
    DeftNDArrayHandle a = make(DEFT_FLOAT32, 1, SHAPE(3), VALUES(5, 6, 7));
    DeftNDArrayHandle idx = make(DEFT_INT32, 1, SHAPE(2), VALUES(0, 9));
    DeftNDArrayHandle dst = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(-1, -1));
    DeftNDArrayHandle in[2] = {a, idx}, out[1] = {dst};
    int nout = 1;
    ck_assert_ok(DeftGetLiveNDArrayCount(&before));
    /* Kernels run asynchronously: the failure comes with the next wait on the output. */
    ck_assert_ok(call("take", 2, in, &nout, out, P("mode", "raise")));
    ck_assert_fails(DeftNDArrayWaitToRead(dst), DEFT_ERROR_INDEX,
                    "DeftImperativeInvoke: operator 'take': index 9 (position 1) is out of range "
                    "for axis 0 of size 3");
    /* The failure stays on the output: its contents are never read as valid. */
    ck_assert_fails(DeftNDArrayWaitToRead(dst), DEFT_ERROR_INDEX, "index 9");
    ck_assert_fails(DeftWaitAll(), DEFT_ERROR_INDEX, "index 9");
    ck_assert_ok(DeftGetLiveNDArrayCount(&after));
    ck_assert_int_eq(before, after);
    free_all(3, (DeftNDArrayHandle[]){a, idx, dst});
}
END_TEST

START_TEST(test_parameter_cache_gives_each_call_its_own_values) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(1));
    for (int round = 0; round < 3; round++) {
        for (int s = 0; s < 12; s++) { /* more distinct strings than cache slots */
            char text[16];
            snprintf(text, sizeof text, "%d", s);
            DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", text));
            assert_values(y, 1, VALUES(1.0 + s), 0);
            ck_assert_ok(DeftNDArrayFree(y));
        }
    }
    char long_value[400];
    memset(long_value, ' ', sizeof long_value);
    memcpy(long_value + 390, "2.5", 4);
    DeftNDArrayHandle y = call1("_mul_scalar", 1, &x, P("scalar", long_value));
    assert_values(y, 1, VALUES(2.5), 0);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

/* A call is checked first against the strings of the call before it, two bytes a step
 * (registry.c): a value or key that differs in its last byte, stops short of the cached
 * one or runs past it, at odd and even lengths, is a new set of parameters. */
START_TEST(test_parameter_cache_tells_near_strings_apart) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(0));
    const char *values[] = {"12", "1", "12", "123", "12", "1234", "124", "13", "2", "21", "2"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", values[i]));
        assert_values(y, 1, VALUES(atof(values[i])), 0);
        ck_assert_ok(DeftNDArrayFree(y));
    }
    const char *keys[] = {"scala", "scalars", "scalaR"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        DeftNDArrayHandle y = call1("_plus_scalar", 1, &x, P("scalar", "5"));
        ck_assert_ok(DeftNDArrayFree(y));
        ck_assert_call_fails("_plus_scalar", 1, &x, P(keys[i], "5"), DEFT_ERROR_VALUE,
                             "unknown parameter");
    }
    free_all(1, &x);
}
END_TEST

/* Nodes share a cache slot's parameter set, whose references the slot takes a batch
 * at a time (registry.c): once the slot is reused, the set is held by exactly the
 * nodes' references, whatever was left of the batch having gone back. */
START_TEST(test_shared_parameter_set_counts_only_its_holders) {
    const deft_op_entry_t *entry = deft_registry_find("_plus_scalar");
    const char *key = "scalar", *val = "7.5";
    const deft_params_t *params;
    ck_assert_ok(deft_op_parse_params(entry, 1, &key, &val, &params));
    enum { HOLDERS = 100 }; /* more than one batch */
    deft_param_set_t *held[HOLDERS];
    for (int i = 0; i < HOLDERS; i++) {
        held[i] = deft_param_set_take(entry, params->v);
        ck_assert_ptr_eq(held[i], held[0]);
    }
    for (int s = 0; s < 9; s++) { /* every slot reused: the set's slot lets it go */
        char text[16];
        snprintf(text, sizeof text, "%d.25", s);
        const char *other = text;
        ck_assert_ok(deft_op_parse_params(entry, 1, &key, &other, &params));
    }
    int refs = atomic_load(&held[0]->refs);
    ck_assert_int_eq(refs, HOLDERS);
    ck_assert_double_eq(held[0]->v[0].f, 7.5);
    for (int i = 0; i < HOLDERS; i++) deft_param_set_release(held[i]);
}
END_TEST

/* A call whose parameters are too long to cache must not leave the slot it would have
 * taken half rewritten: that slot's old parameters (slope 0.5078125) would then answer
 * a later call with the first key and value of the long one (slope 0.1). */
START_TEST(test_parameters_too_long_to_cache_leave_no_stale_slot) {
    DeftNDArrayHandle x = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(-1));
    const char *act = "leaky";
    DeftNDArrayHandle y = call1("LeakyReLU", 1, &x, P("slope", "0.5078125"));
    assert_values(y, 1, VALUES(-0.5078125), 0);
    ck_assert_ok(DeftNDArrayFree(y));
    for (int s = 1; s < 8; s++) { /* the next seven slots: the slot above is next again */
        char text[32];
        snprintf(text, sizeof text, "0.%d0703125", s);
        y = call1("LeakyReLU", 1, &x, P("slope", text));
        ck_assert_ok(DeftNDArrayFree(y));
    }
    char long_value[400];
    memset(long_value, ' ', sizeof long_value);
    memcpy(long_value + 390, "0.125", 6);
    y = call1("LeakyReLU", 1, &x, P("slope", "0.1", "lower_bound", long_value, "act_type", act));
    assert_values(y, 1, VALUES(-0.1), 0);
    ck_assert_ok(DeftNDArrayFree(y));
    y = call1("LeakyReLU", 1, &x, P("slope", "0.1"));
    assert_values(y, 1, VALUES(-0.1), 0);
    free_all(2, (DeftNDArrayHandle[]){x, y});
}
END_TEST

START_TEST(test_tuple_syntax_variants) {
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 3, SHAPE(2, 3, 4), NULL);
    const char *forms[] = {"(0,2)", "[0, 2]", " ( 0 , 2 ) ", "(0,2,)", "(-3,-1)"};
    for (size_t i = 0; i < 5; i++) {
        DeftNDArrayHandle y = call1("sum", 1, &x, P("axis", forms[i]));
        assert_shape(y, 1, SHAPE(3));
        ck_assert_ok(DeftNDArrayFree(y));
    }
    DeftNDArrayHandle y = call1("sum", 1, &x, P("axis", "1"));
    assert_shape(y, 2, SHAPE(2, 4));
    ck_assert_ok(DeftNDArrayFree(y));
    ck_assert_call_fails("sum", 1, &x, P("axis", "(0,2"), DEFT_ERROR_PARSE, "is '(0,2'");
    ck_assert_call_fails("sum", 1, &x, P("axis", "(0 2)"), DEFT_ERROR_PARSE, "is '(0 2)'");
    ck_assert_call_fails("sum", 1, &x, P("axis", "(3,)"), DEFT_ERROR_INDEX,
                         "axis is 3, expected an axis in [-3, 3)");
    ck_assert_call_fails("sum", 1, &x, P("axis", "(1,-2)"), DEFT_ERROR_VALUE,
                         "axis 1 is listed twice");
    ck_assert_ok(DeftNDArrayFree(x));
}
END_TEST

static Suite *registry_suite(void) {
    Suite *suite = suite_create("op registry");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, test_cached_op_naming_no_graph_is_a_value_error); /* first: no graph yet */
    tcase_add_test(tc, test_lists_sorted_operators_including_mxnet_names);
    tcase_add_test(tc, test_aliases_find_their_operators);
    tcase_add_test(tc, test_input_names_past_the_list);
    tcase_add_test(tc, test_every_default_parses_and_every_op_is_documented);
    tcase_add_test(tc, test_introspection_describes_fully_connected);
    tcase_add_test(tc, test_introspection_rejects_bad_arguments);
    tcase_add_test(tc, test_invoke_reports_parameter_errors);
    tcase_add_test(tc, test_invoke_reports_input_errors);
    tcase_add_test(tc, test_given_outputs_are_checked_and_written);
    tcase_add_test(tc, test_failed_call_creates_and_changes_nothing);
    tcase_add_test(tc, test_wrong_input_count_is_said_plainly);
    tcase_add_test(tc, test_added_operators_are_checked);
    tcase_add_test(tc, test_parameter_cache_gives_each_call_its_own_values);
    tcase_add_test(tc, test_parameter_cache_tells_near_strings_apart);
    tcase_add_test(tc, test_shared_parameter_set_counts_only_its_holders);
    tcase_add_test(tc, test_parameters_too_long_to_cache_leave_no_stale_slot);
    tcase_add_test(tc, test_tuple_syntax_variants);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(registry_suite());
}
