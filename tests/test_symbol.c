/* Symbols: composition, deterministic names, introspection, attributes, JSON and DOT. */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "capi/src/handle.h"
#include "core/graph/subgraph.h"
#include "symbol_helpers.h"

static void assert_names(int n, const char *const *got, int want_n, const char *const *want) {
    ck_assert_int_eq(n, want_n);
    for (int i = 0; i < n; i++) ck_assert_str_eq(got[i], want[i]);
}

static void free_symbols(int n, DeftSymbolHandle *s) {
    for (int i = 0; i < n; i++) ck_assert_ok(DeftSymbolFree(s[i]));
}

START_TEST(test_compose_creates_missing_inputs_with_deterministic_names) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle fc1 = apply("FullyConnected", NULL, 1, &x, P("num_hidden", "8"));
    DeftSymbolHandle act = apply("Activation", "relu1", 1, &fc1, P("act_type", "relu"));
    DeftSymbolHandle fc2 =
        apply("FullyConnected", NULL, 1, &act, P("num_hidden", "2", "no_bias", "true"));
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(fc2, &n, &names));
    assert_names(n, names, 4,
                 (const char *const[]){"x", "fullyconnected0_weight", "fullyconnected0_bias",
                                       "fullyconnected1_weight"});
    ck_assert_ok(DeftSymbolListOutputs(fc2, &n, &names));
    assert_names(n, names, 1, (const char *const[]){"fullyconnected1_output"});
    ck_assert_ok(DeftSymbolListAuxiliaryStates(fc2, &n, &names));
    ck_assert_int_eq(n, 0);
    const char *name;
    ck_assert_ok(DeftSymbolGetName(act, &name));
    ck_assert_str_eq(name, "relu1");
    /* The same graph built again is named the same way: no process-wide counter. */
    DeftSymbolHandle x2 = var("x");
    DeftSymbolHandle again = apply("FullyConnected", NULL, 1, &x2, P("num_hidden", "8"));
    ck_assert_ok(DeftSymbolListArguments(again, &n, &names));
    ck_assert_str_eq(names[1], "fullyconnected0_weight");
    free_symbols(6, (DeftSymbolHandle[]){x, fc1, act, fc2, x2, again});
}
END_TEST

START_TEST(test_named_inputs_group_internals_children_outputs) {
    DeftSymbolHandle a = var("a"), w = var("w");
    DeftSymbolHandle fc = atomic("FullyConnected", P("num_hidden", "3"));
    ck_assert_ok(DeftSymbolCompose(fc, "fc", 2, (const char *const[]){"weight", "data"},
                                   (DeftSymbolHandle[]){w, a}));
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(fc, &n, &names));
    assert_names(n, names, 3, (const char *const[]){"a", "w", "fc_bias"});
    DeftSymbolHandle parts = apply("split", "sp", 1, &a, P("num_outputs", "3", "axis", "0"));
    ck_assert_ok(DeftSymbolGetNumOutputs(parts, &n));
    ck_assert_int_eq(n, 3);
    ck_assert_ok(DeftSymbolListOutputs(parts, &n, &names));
    assert_names(n, names, 3, (const char *const[]){"sp_output0", "sp_output1", "sp_output2"});
    DeftSymbolHandle second, group, internals, children;
    ck_assert_ok(DeftSymbolGetOutput(parts, 1, &second));
    ck_assert_ok(DeftSymbolCreateGroup(2, (DeftSymbolHandle[]){fc, second}, &group));
    ck_assert_ok(DeftSymbolListOutputs(group, &n, &names));
    assert_names(n, names, 2, (const char *const[]){"fc_output", "sp_output1"});
    ck_assert_ok(DeftSymbolGetInternals(group, &internals));
    ck_assert_ok(DeftSymbolListOutputs(internals, &n, &names));
    assert_names(n, names, 7,
                 (const char *const[]){"a", "w", "fc_bias", "fc_output", "sp_output0", "sp_output1",
                                       "sp_output2"});
    ck_assert_ok(DeftSymbolGetChildren(fc, &children));
    ck_assert_ok(DeftSymbolListOutputs(children, &n, &names));
    assert_names(n, names, 3, (const char *const[]){"a", "w", "fc_bias"});
    DeftSymbolHandle bad = NULL;
    ck_assert_fails(DeftSymbolGetOutput(parts, 3, &bad), DEFT_ERROR_INDEX,
                    "index is 3, but the symbol has 3 outputs");
    ck_assert_fails(DeftSymbolGetChildren(group, &bad), DEFT_ERROR_VALUE,
                    "groups outputs of several nodes");
    ck_assert_ptr_null(bad);
    free_symbols(8, (DeftSymbolHandle[]){a, w, fc, parts, second, group, internals, children});
}
END_TEST

START_TEST(test_compose_rejects_bad_inputs) {
    DeftSymbolHandle x = var("x"), y = var("y");
    DeftSymbolHandle parts = apply("split", NULL, 1, &x, P("num_outputs", "2"));
    DeftSymbolHandle add = atomic("broadcast_add", NO_PARAMS);
    ck_assert_fails(DeftSymbolCompose(add, NULL, 1, (const char *const[]){"lhz"}, &x),
                    DEFT_ERROR_VALUE, "operator 'broadcast_add': has no input named 'lhz'");
    ck_assert_fails(DeftSymbolCompose(add, NULL, 2, (const char *const[]){"lhs", "lhs"},
                                      (DeftSymbolHandle[]){x, y}),
                    DEFT_ERROR_VALUE, "input 'lhs' is given twice");
    ck_assert_fails(DeftSymbolCompose(add, NULL, 1, NULL, &parts), DEFT_ERROR_VALUE,
                    "args[0] has 2 outputs, expected exactly 1");
    ck_assert_fails(DeftSymbolCompose(add, NULL, 3, NULL, (DeftSymbolHandle[]){x, y, x}),
                    DEFT_ERROR_VALUE, "got 3 inputs, expected at most 2");
    int n;
    ck_assert_fails(DeftSymbolGetNumOutputs(add, &n), DEFT_ERROR_VALUE,
                    "sym is an operator symbol ('broadcast_add') that has not been composed");
    ck_assert_ok(DeftSymbolCompose(add, NULL, 2, NULL, (DeftSymbolHandle[]){x, y}));
    ck_assert_fails(DeftSymbolCompose(add, NULL, 2, NULL, (DeftSymbolHandle[]){x, y}),
                    DEFT_ERROR_VALUE, "the symbol is already composed");
    DeftSymbolHandle out = NULL;
    ck_assert_fails(DeftSymbolCreateVariable("", &out), DEFT_ERROR_VALUE, "name is empty");
    ck_assert_fails(DeftSymbolCreateAtomic(op_named("sum"), 1, (const char *const[]){"axes"},
                                           (const char *const[]){"0"}, &out),
                    DEFT_ERROR_VALUE, "unknown parameter 'axes'");
    ck_assert_fails(DeftSymbolCreateAtomic(NULL, 0, NULL, NULL, &out), DEFT_ERROR_VALUE,
                    "op ((nil)) is not an operator handle");
    ck_assert_ptr_null(out);
    free_symbols(4, (DeftSymbolHandle[]){x, y, parts, add});
    ck_assert_fails(DeftSymbolFree(x), DEFT_ERROR_VALUE, "a Symbol handle that was already freed");
    DeftNDArrayHandle arr = make(DEFT_FLOAT32, 1, SHAPE(1), NULL);
    ck_assert_fails(DeftSymbolFree((DeftSymbolHandle)(void *)arr), DEFT_ERROR_TYPE,
                    "is an NDArray handle, expected a Symbol handle");
    ck_assert_ok(DeftNDArrayFree(arr));
}
END_TEST

START_TEST(test_attributes_copy_on_write) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle copy;
    ck_assert_ok(DeftSymbolCopy(x, &copy));
    ck_assert_ok(DeftSymbolSetAttr(x, "__shape__", "(2,3)"));
    const char *value;
    int found;
    ck_assert_ok(DeftSymbolGetAttr(x, "__shape__", &value, &found));
    ck_assert_int_eq(found, 1);
    ck_assert_str_eq(value, "(2,3)");
    ck_assert_ok(DeftSymbolGetAttr(copy, "__shape__", &value, &found));
    ck_assert_int_eq(found, 0);
    ck_assert_ptr_null(value);
    DeftSymbolHandle s = apply("sum", "total", 1, &x, P("axis", "(0,)"));
    ck_assert_ok(DeftSymbolGetAttr(s, "axis", &value, &found));
    ck_assert_str_eq(value, "(0,)");
    ck_assert_ok(DeftSymbolSetAttr(s, "keepdims", "true"));
    ck_assert_fails(DeftSymbolSetAttr(s, "keepdims", "perhaps"), DEFT_ERROR_PARSE,
                    "parameter 'keepdims' is 'perhaps'");
    ck_assert_fails(DeftSymbolSetAttr(s, NULL, "1"), DEFT_ERROR_VALUE, "key is NULL");
    ck_assert_ok(DeftSymbolGetAttr(s, "keepdims", &value, &found));
    ck_assert_str_eq(value, "true");
    free_symbols(3, (DeftSymbolHandle[]){x, copy, s});
}
END_TEST

/* A valid value for any parameter, by type: enough to build and save a node. */
static const char *sample_value(const char *type, DeftOpHandle op, int index) {
    if (!strncmp(type, "int", 3)) return "1";
    if (!strncmp(type, "float", 5)) return "0.5";
    if (!strcmp(type, "boolean")) return "true";
    if (!strncmp(type, "tuple", 5)) return "(1,)";
    if (!strcmp(type, "dtype")) return "float64";
    if (!strcmp(type, "device")) return "cpu(1)";
    if (!strcmp(type, "string")) return "elemwise_add i0 i1"; /* _fused_elemwise's program */
    int n;
    const char *const *words;
    ck_assert_ok(DeftOpGetParamChoices(op, index, &n, &words));
    return words[n - 1];
}

/* The id of the graph a CachedOp registers for recorded calls of it. */
static const char *subgraph_id(DeftCachedOpHandle handle) {
    deft_cached_op_t *op = deft_handle_lookup(handle, DEFT_HANDLE_CACHED_OP);
    deft_subgraph_t *sg;
    ck_assert_ptr_nonnull(op);
    ck_assert_int_eq(deft_cached_op_subgraph(op, false, &sg), 0);
    return deft_subgraph_id(sg);
}

/* Every operator in a graph: save, load, save again gives the same text. */
START_TEST(test_json_round_trip_for_every_operator) {
    int count;
    const char *const *ops;
    ck_assert_ok(DeftListOperators(&count, &ops));
    /* _CachedOp's parameter names a graph registered in this process. */
    DeftSymbolHandle gx = var("x"), ge = apply("exp", NULL, 1, &gx, NO_PARAMS);
    DeftCachedOpHandle graph;
    ck_assert_ok(DeftCachedOpCreate(ge, 0, &graph));
    for (int o = 0; o < count; o++) {
        DeftOpHandle op = op_named(ops[o]);
        int nparams, min, max, nnames;
        const char *const *input_names;
        ck_assert_ok(DeftOpGetNumParams(op, &nparams));
        ck_assert_ok(DeftOpGetInputs(op, &min, &max, &nnames, &input_names));
        const char *keys[16], *vals[16];
        for (int p = 0; p < nparams; p++) {
            const char *name, *type, *def, *doc;
            ck_assert_ok(DeftOpGetParam(op, p, &name, &type, &def, &doc));
            keys[p] = name;
            vals[p] = strcmp(ops[o], "_CachedOp") ? sample_value(type, op, p) : subgraph_id(graph);
        }
        DeftSymbolHandle s, in[6], loaded;
        for (int i = 0; i < 6; i++) in[i] = var((const char *[]){"a", "b", "c", "d", "e", "f"}[i]);
        ck_assert_msg(DeftSymbolCreateAtomic(op, nparams, keys, vals, &s) == 0, "%s: %s", ops[o],
                      DeftGetLastError());
        int nin = min == max ? min : (min > 1 ? min : 2);
        /* operators whose parameters decide their inputs (BilinearResize2D's mode) */
        const deft_op_entry_t *entry = deft_registry_find(ops[o]);
        const deft_params_t *parsed;
        if (entry->op->num_inputs && deft_op_parse_params(entry, nparams, keys, vals, &parsed) == 0)
            nin = entry->op->num_inputs(parsed->v);
        /* up to 3 inputs (the rest of a fixed count are made), more when needed */
        int given = nin > 3 && min <= 3 ? 3 : nin > 6 ? 6 : nin;
        ck_assert_msg(DeftSymbolCompose(s, NULL, given, NULL, in) == 0, "%s: %s", ops[o],
                      DeftGetLastError());
        const char *json;
        ck_assert_ok(DeftSymbolSaveToJSON(s, &json));
        char *first = strdup(json);
        ck_assert_msg(DeftSymbolCreateFromJSON(first, &loaded) == 0, "%s: %s", ops[o],
                      DeftGetLastError());
        ck_assert_ok(DeftSymbolSaveToJSON(loaded, &json));
        ck_assert_msg(strcmp(first, json) == 0, "%s changed in a round trip:\n%s\n---\n%s", ops[o],
                      first, json);
        free(first);
        free_symbols(2, (DeftSymbolHandle[]){s, loaded});
        free_symbols(6, in);
    }
    ck_assert_ok(DeftCachedOpFree(graph));
    free_symbols(2, (DeftSymbolHandle[]){gx, ge});
}
END_TEST

/* A two-layer MLP written by hand in MXNet 1.x's layout: 2-element entries,
 * no node_row_ptr, capitalised booleans, "attr" spelling on one node. */
static const char *mxnet_mlp =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc1_weight\", \"attrs\": {\"__init__\": \"[\\\"xavier\\\", "
    "{}]\"}, \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc1_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc1\", \"attrs\": {\"num_hidden\": \"128\", "
    "\"no_bias\": \"False\", \"flatten\": \"True\"}, \"inputs\": [[0, 0], [1, 0, 0], [2, 0, 0]]},"
    "{\"op\": \"Activation\", \"name\": \"relu1\", \"attr\": {\"act_type\": \"relu\"}, "
    "\"inputs\": [[3, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"fc2_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc2_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc2\", \"attrs\": {\"num_hidden\": \"10\"}, "
    "\"inputs\": [[4, 0, 0], [5, 0, 0], [6, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"label\", \"inputs\": []},"
    "{\"op\": \"softmax_cross_entropy\", \"name\": \"loss\", \"inputs\": [[7, 0, 0], [8, 0, 0]]}"
    "], \"arg_nodes\": [0, 1, 2, 5, 6, 8], \"heads\": [[9, 0, 0]],"
    "\"attrs\": {\"mxnet_version\": [\"int\", 10600]}}";

START_TEST(test_loads_mxnet_layout_mlp) {
    DeftSymbolHandle s;
    ck_assert_msg(DeftSymbolCreateFromJSON(mxnet_mlp, &s) == 0, "%s", DeftGetLastError());
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(s, &n, &names));
    assert_names(
        n, names, 6,
        (const char *const[]){"data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "label"});
    ck_assert_ok(DeftSymbolListOutputs(s, &n, &names));
    assert_names(n, names, 1, (const char *const[]){"loss_output"});
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(s, &json));
    ck_assert_ptr_nonnull(strstr(json, "\"node_row_ptr\""));
    ck_assert_ptr_nonnull(strstr(json, "\"mxnet_version\""));
    ck_assert_ptr_nonnull(strstr(json, "\"__init__\""));
    const char *dot;
    ck_assert_ok(DeftSymbolToDot(s, &dot));
    ck_assert_ptr_nonnull(strstr(dot, "digraph deft"));
    ck_assert_ptr_nonnull(strstr(dot, "label=\"FullyConnected\\nfc1\""));
    /* arguments come first (in saved order), so fc1 and relu1 are n6 and n7 */
    ck_assert_ptr_nonnull(strstr(dot, "n6 -> n7;"));
    ck_assert_ok(DeftSymbolFree(s));
}
END_TEST

/* Malformed JSON: each must fail with DEFT_ERROR_PARSE and a message naming where. */
static const struct {
    const char *json, *message;
} malformed[] = {
    {"", "invalid JSON at byte 0"},
    {"{\"nodes\": [", "invalid JSON"},
    {"[1, 2]", "(root): is not an object"},
    {"{\"heads\": []}", "nodes: is missing or not an array"},
    {"{\"nodes\": {}, \"heads\": []}", "nodes: is missing or not an array"},
    {"{\"nodes\": [], \"heads\": []}", "nodes: is empty"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}]}", "heads: is missing or not an array"},
    {"{\"nodes\": [3], \"heads\": [[0,0]]}", "nodes[0]: is not an object"},
    {"{\"nodes\": [{\"name\": \"x\"}], \"heads\": [[0,0]]}", "nodes[0]: has no \"op\" string"},
    {"{\"nodes\": [{\"op\": 7, \"name\": \"x\"}], \"heads\": [[0,0]]}", "has no \"op\" string"},
    {"{\"nodes\": [{\"op\": \"null\"}], \"heads\": [[0,0]]}", "nodes[0]: has no \"name\" string"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": 5}], \"heads\": [[0,0]]}",
     "\"inputs\" is not an array"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"attrs\": {\"a\": 1}}], \"heads\": "
     "[[0,0]]}",
     "attribute \"a\" is not a string"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"exp\", \"name\": \"e\", "
     "\"inputs\": [[1, 0]]}], \"heads\": [[1,0]]}",
     "nodes[1].inputs[0][0]: is 1, expected a node index below 1"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"exp\", \"name\": \"e\", "
     "\"inputs\": [[0, 1]]}], \"heads\": [[1,0]]}",
     "nodes[1].inputs[0][1]: is 1, expected an output of node 0, below 1"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"exp\", \"name\": \"e\", "
     "\"inputs\": [[0]]}], \"heads\": [[1,0]]}",
     "nodes[1].inputs[0]: is not an entry"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"exp\", \"name\": \"e\", "
     "\"inputs\": [[-1, 0]]}], \"heads\": [[1,0]]}",
     "is -1, expected a node index below 1"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"exp\", \"name\": \"e\", "
     "\"inputs\": [[0.5, 0]]}], \"heads\": [[1,0]]}",
     "is 0.5, expected a node index"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"exp\", \"name\": \"e\", "
     "\"inputs\": [[1e300, 0]]}], \"heads\": [[1,0]]}",
     "is 1e+300, expected a node index"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"Exp\", \"name\": \"e\", "
     "\"inputs\": [[0, 0]]}], \"heads\": [[1,0]]}",
     "nodes[1]: unknown operator 'Exp' (did you mean 'exp'?)"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"sum\", \"name\": \"s\", "
     "\"attrs\": {\"axis\": \"(0,\"}, \"inputs\": [[0, 0]]}], \"heads\": [[1,0]]}",
     "nodes[1] (\"s\"): operator 'sum': parameter 'axis' is '(0,'"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"exp\", \"name\": \"e\", "
     "\"inputs\": [[0, 0], [0, 0]]}], \"heads\": [[1,0]]}",
     "nodes[1] (\"e\"): operator 'exp': got 2 inputs, expected 1"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": [[0, 0]]}], \"heads\": [[0,0]]}",
     "nodes[0].inputs[0][0]: is 0, expected a node index below 0"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}], \"heads\": [[1, 0]]}",
     "heads[0][0]: is 1, expected a node index below 1"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}], \"heads\": []}", "heads: is empty"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}, {\"op\": \"exp\", \"name\": \"e\", "
     "\"inputs\": [[0, 0]]}], \"arg_nodes\": [1], \"heads\": [[1,0]]}",
     "arg_nodes[0]: is node 1, which is not a variable"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}], \"node_row_ptr\": [0, 0], "
     "\"heads\": [[0,0]]}",
     "node_row_ptr[1]: is 0, expected a running count of node outputs"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}], \"node_row_ptr\": [1, 2], "
     "\"heads\": [[0,0]]}",
     "node_row_ptr[0]: is 1, expected 0"},
    {"{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"}], \"node_row_ptr\": [0], \"heads\": "
     "[[0,0]]}",
     "node_row_ptr: is not an array of 2 numbers"},
};

/* MXNet counts outputs deft does not have (sort's hidden indices, the pooling
 * workspace of MKL-DNN builds) in node_row_ptr: such a graph loads. */
START_TEST(test_json_rows_may_count_other_hidden_outputs) {
    const char *json =
        "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}, "
        "{\"op\": \"sort\", \"name\": \"s\", \"attrs\": {\"axis\": \"-1\"}, "
        "\"inputs\": [[0, 0, 0]]}], \"arg_nodes\": [0], \"node_row_ptr\": [0, 1, 3], "
        "\"heads\": [[1, 0, 0]]}";
    DeftSymbolHandle s = NULL;
    ck_assert_msg(DeftSymbolCreateFromJSON(json, &s) == 0, "%s", DeftGetLastError());
    int n;
    ck_assert_ok(DeftSymbolGetNumOutputs(s, &n));
    ck_assert_int_eq(n, 1);
    ck_assert_ok(DeftSymbolFree(s));
}
END_TEST

/* MXNet 1.x graphs: a 0 in a creation operator's shape is found from its
 * consumers (Gluon's begin states); a 0 nobody fills is a zero size. */
START_TEST(test_zero_dims_of_creation_operators_are_inferred) {
    DeftSymbolHandle data = var("data");
    DeftSymbolHandle z = apply("_zeros", "z", 0, NULL, P("shape", "(0,4)"));
    DeftSymbolHandle sum =
        apply("elemwise_add", "sum", 2, (DeftSymbolHandle[]){data, z}, NO_PARAMS);
    DeftSymbolHandle alone = apply("_ones", "alone", 0, NULL, P("shape", "(0,3)"));
    DeftSymbolHandle group;
    ck_assert_ok(DeftSymbolCreateGroup(2, (DeftSymbolHandle[]){sum, alone}, &group));
    DeftCachedOpHandle exec;
    ck_assert_ok(DeftCachedOpCreate(group, 1, &exec));
    DeftNDArrayHandle x = make(DEFT_FLOAT32, 2, SHAPE(2, 4), VALUES(1, 2, 3, 4, 5, 6, 7, 8));
    DeftNDArrayHandle out[2] = {NULL, NULL};
    int nout = 2;
    ck_assert_msg(DeftCachedOpInvoke(exec, 1, &x, &nout, out) == 0, "%s", DeftGetLastError());
    assert_shape(out[0], 2, SHAPE(2, 4));
    assert_values(out[0], 8, VALUES(1, 2, 3, 4, 5, 6, 7, 8), 0);
    assert_shape(out[1], 2, SHAPE(0, 3));
    free_all(3, (DeftNDArrayHandle[]){x, out[0], out[1]});
    ck_assert_ok(DeftCachedOpFree(exec));
    free_symbols(5, (DeftSymbolHandle[]){data, z, sum, alone, group});
}
END_TEST

START_TEST(test_malformed_json_fails_cleanly_with_a_path) {
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        DeftSymbolHandle s = NULL;
        ck_assert_int_eq(DeftSymbolCreateFromJSON(malformed[i].json, &s), -1);
        ck_assert_msg(DeftGetLastErrorKind() == DEFT_ERROR_PARSE, "case %zu: kind %d (%s)", i,
                      DeftGetLastErrorKind(), DeftGetLastError());
        ck_assert_msg(strstr(DeftGetLastError(), malformed[i].message) != NULL,
                      "case %zu: '%s' does not contain '%s'", i, DeftGetLastError(),
                      malformed[i].message);
        ck_assert_ptr_null(s);
    }
    int64_t live;
    ck_assert_ok(DeftGetLiveSymbolCount(&live));
    ck_assert_int_eq(live, 0);
}
END_TEST

START_TEST(test_files_and_file_errors) {
    DeftSymbolHandle x = var("x"), loaded = NULL;
    DeftSymbolHandle e = apply("exp", "e", 1, &x, NO_PARAMS);
    char path[] = "/tmp/deft_symbol_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_ok(DeftSymbolSaveToFile(e, path));
    ck_assert_ok(DeftSymbolCreateFromFile(path, &loaded));
    const char *a, *b;
    ck_assert_ok(DeftSymbolSaveToJSON(e, &a));
    ck_assert_ok(DeftSymbolSaveToJSON(loaded, &b));
    ck_assert_str_eq(a, b);
    unlink(path);
    DeftSymbolHandle none = NULL;
    ck_assert_fails(DeftSymbolCreateFromFile("/nonexistent/graph.json", &none), DEFT_ERROR_VALUE,
                    "cannot open '/nonexistent/graph.json'");
    ck_assert_fails(DeftSymbolSaveToFile(e, "/nonexistent/dir/g.json"), DEFT_ERROR_VALUE,
                    "cannot write '/nonexistent/dir/g.json'");
    ck_assert_fails(DeftSymbolCreateFromJSON(NULL, &none), DEFT_ERROR_VALUE, "json is NULL");
    ck_assert_ptr_null(none);
    free_symbols(3, (DeftSymbolHandle[]){x, e, loaded});
}
END_TEST

/* A temporary file holding `len` bytes of `text` (NULL: a hole of `len` bytes). */
static void temp_file(char *path, const char *text, off_t len) {
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    if (text)
        ck_assert_int_eq(write(fd, text, (size_t)len), len);
    else
        ck_assert_int_eq(ftruncate(fd, len), 0);
    close(fd);
}

/* What is not a symbol file is refused as such, at once, naming the path. */
START_TEST(test_file_that_is_no_symbol_is_refused_by_what_it_is) {
    DeftSymbolHandle none = NULL;
    /* endless: refused without reading (it used to read 1 GiB, then report no memory) */
    ck_assert_fails(DeftSymbolCreateFromFile("/dev/zero", &none), DEFT_ERROR_VALUE,
                    "DeftSymbolCreateFromFile: '/dev/zero' is not a regular file");
    ck_assert_fails(DeftSymbolCreateFromFile("/tmp", &none), DEFT_ERROR_VALUE,
                    "'/tmp' is not a regular file (a directory)");
    /* larger than the documented 256 MiB (a hole: nothing is written or read) */
    char big[] = "/tmp/deft_symbol_big_XXXXXX";
    temp_file(big, NULL, (off_t)256 * 1024 * 1024 + 1);
    ck_assert_fails(DeftSymbolCreateFromFile(big, &none), DEFT_ERROR_VALUE,
                    "is 268435457 bytes, more than the 268435456 (256 MiB) a symbol file may have");
    ck_assert_ptr_nonnull(strstr(DeftGetLastError(), big));
    unlink(big);
    /* text that is not JSON: a parse error naming the file and the byte */
    char text[] = "/tmp/deft_symbol_text_XXXXXX";
    temp_file(text, "{\"nodes\": [}", 12);
    ck_assert_fails(DeftSymbolCreateFromFile(text, &none), DEFT_ERROR_PARSE,
                    "invalid JSON at byte");
    ck_assert_ptr_nonnull(strstr(DeftGetLastError(), text));
    unlink(text);
    /* a NUL byte would end the text early: what follows would be ignored */
    static const char nul[] = "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}], "
                              "\"heads\": [[0, 0, 0]]}\0 and more";
    char binary[] = "/tmp/deft_symbol_nul_XXXXXX";
    temp_file(binary, nul, sizeof nul - 1);
    ck_assert_fails(DeftSymbolCreateFromFile(binary, &none), DEFT_ERROR_PARSE,
                    "contains a NUL byte at byte 76");
    ck_assert_ptr_nonnull(strstr(DeftGetLastError(), binary));
    unlink(binary);
    ck_assert_ptr_null(none);
}
END_TEST

START_TEST(test_long_chain_is_indexed_and_freed_without_recursion) {
    DeftSymbolHandle cur = var("x");
    for (int i = 0; i < 100000; i++) {
        DeftSymbolHandle next = apply("_plus_scalar", NULL, 1, &cur, P("scalar", "1"));
        ck_assert_ok(DeftSymbolFree(cur));
        cur = next;
    }
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListArguments(cur, &n, &names));
    assert_names(n, names, 1, (const char *const[]){"x"});
    const char *name;
    ck_assert_ok(DeftSymbolGetName(cur, &name));
    ck_assert_str_eq(name, "plus_scalar99999");
    ck_assert_ok(DeftSymbolFree(cur));
}
END_TEST

static void assert_inferred(DeftSymbolHandle s, int group, int index, int ndim, const int64_t *dims,
                            int dtype) {
    int64_t got[DEFT_MAX_NDIM];
    int got_ndim, got_dtype;
    ck_assert_ok(
        DeftSymbolGetInferredShape(s, group, index, got, DEFT_MAX_NDIM, &got_ndim, &got_dtype));
    ck_assert_int_eq(got_ndim, ndim);
    ck_assert_int_eq(got_dtype, dtype);
    for (int d = 0; d < ndim; d++) ck_assert_int_eq(got[d], dims[d]);
}

START_TEST(test_infer_shape_forward_and_backward) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle fc1 = apply("FullyConnected", "fc1", 1, &x, P("num_hidden", "8"));
    DeftSymbolHandle act = apply("Activation", "act", 1, &fc1, P("act_type", "tanh"));
    DeftSymbolHandle fc2 = apply("FullyConnected", "fc2", 1, &act, P("num_hidden", "3"));
    int complete = -1;
    ck_assert_ok(DeftSymbolInferShape(fc2, 1, (const char *const[]){"x"}, (const int[]){3},
                                      (const int64_t[]){4, 5, 6}, (const int[]){DEFT_FLOAT64},
                                      &complete));
    ck_assert_int_eq(complete, 1);
    assert_inferred(fc2, DEFT_ARGUMENTS, 0, 3, SHAPE(4, 5, 6), DEFT_FLOAT64);
    assert_inferred(fc2, DEFT_ARGUMENTS, 1, 2, SHAPE(8, 30), DEFT_FLOAT64); /* fc1_weight */
    assert_inferred(fc2, DEFT_ARGUMENTS, 2, 1, SHAPE(8), DEFT_FLOAT64);     /* fc1_bias */
    assert_inferred(fc2, DEFT_ARGUMENTS, 3, 2, SHAPE(3, 8), DEFT_FLOAT64);
    assert_inferred(fc2, DEFT_OUTPUTS, 0, 2, SHAPE(4, 3), DEFT_FLOAT64);
    /* An elementwise input follows from its sibling; shapes may come from attributes. */
    DeftSymbolHandle a = var("a"), b = var("b");
    ck_assert_ok(DeftSymbolSetAttr(a, "__shape__", "(2,7)"));
    ck_assert_ok(DeftSymbolSetAttr(a, "__dtype__", "int32"));
    DeftSymbolHandle sum = apply("elemwise_add", "sum", 2, (DeftSymbolHandle[]){a, b}, NO_PARAMS);
    ck_assert_ok(DeftSymbolInferShape(sum, 0, NULL, NULL, NULL, NULL, &complete));
    ck_assert_int_eq(complete, 1);
    assert_inferred(sum, DEFT_ARGUMENTS, 1, 2, SHAPE(2, 7), DEFT_INT32);
    assert_inferred(sum, DEFT_OUTPUTS, 0, 2, SHAPE(2, 7), DEFT_INT32);
    /* Nothing known: incomplete, and unknown entries say so. */
    DeftSymbolHandle c = var("c");
    DeftSymbolHandle total = apply("sum", NULL, 1, &c, NO_PARAMS);
    ck_assert_ok(DeftSymbolInferShape(total, 0, NULL, NULL, NULL, NULL, &complete));
    ck_assert_int_eq(complete, 0);
    assert_inferred(total, DEFT_OUTPUTS, 0, -1, NULL, -1);
    free_symbols(9, (DeftSymbolHandle[]){x, fc1, act, fc2, a, b, sum, c, total});
}
END_TEST

/* Partial shapes: dimensions given as -1 are filled in by inference and checked. */
START_TEST(test_infer_partial_shapes) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle fc = apply("FullyConnected", "fc", 1, &x, P("num_hidden", "6"));
    int complete = -1;
    const char *const both[] = {"x", "fc_weight"};
    ck_assert_ok(DeftSymbolInferShape(fc, 2, both, (const int[]){2, 2},
                                      (const int64_t[]){4, 5, -1, 5}, NULL, &complete));
    ck_assert_int_eq(complete, 1);
    assert_inferred(fc, DEFT_ARGUMENTS, 1, 2, SHAPE(6, 5), DEFT_FLOAT32);
    ck_assert_fails(DeftSymbolInferShape(fc, 2, both, (const int[]){2, 2},
                                         (const int64_t[]){4, 5, -1, 7}, NULL, &complete),
                    DEFT_ERROR_VALUE,
                    "node 'fc': input 1 ('fc_weight') was given shape (-1,7), but the operator "
                    "needs (6,5)");
    ck_assert_fails(DeftSymbolInferShape(fc, 1, both, (const int[]){2}, (const int64_t[]){4, -2},
                                         NULL, &complete),
                    DEFT_ERROR_VALUE, "shape of 'x'[1] is -2");
    /* an unknown batch stays unknown, and the partial shape is reported as given */
    ck_assert_ok(DeftSymbolInferShape(fc, 1, both, (const int[]){2}, (const int64_t[]){-1, 5}, NULL,
                                      &complete));
    ck_assert_int_eq(complete, 0);
    assert_inferred(fc, DEFT_ARGUMENTS, 0, 2, SHAPE(-1, 5), DEFT_FLOAT32);
    assert_inferred(fc, DEFT_ARGUMENTS, 1, -1, NULL, -1);
    /* the same through a "__shape__" attribute */
    DeftSymbolHandle a = var("a"), b = var("b");
    ck_assert_ok(DeftSymbolSetAttr(a, "__shape__", "(2,-1)"));
    ck_assert_ok(DeftSymbolSetAttr(b, "__shape__", "(2,3)"));
    DeftSymbolHandle sum = apply("elemwise_add", "sum", 2, (DeftSymbolHandle[]){b, a}, NO_PARAMS);
    ck_assert_ok(DeftSymbolInferShape(sum, 0, NULL, NULL, NULL, NULL, &complete));
    ck_assert_int_eq(complete, 1);
    assert_inferred(sum, DEFT_ARGUMENTS, 1, 2, SHAPE(2, 3), DEFT_FLOAT32);
    /* MXNet 1.x writes a 0 for what it does not know yet: a model-zoo
     * convolution's weight is "__shape__": "(64, 0, 7, 7)" */
    DeftSymbolHandle img = var("img"), w = var("w");
    ck_assert_ok(DeftSymbolSetAttr(w, "__shape__", "(4, 0, 3, 3)"));
    DeftSymbolHandle conv = apply("Convolution", "conv", 2, (DeftSymbolHandle[]){img, w},
                                  P("kernel", "(3,3)", "num_filter", "4", "no_bias", "True"));
    ck_assert_ok(DeftSymbolInferShape(conv, 1, (const char *const[]){"img"}, (const int[]){4},
                                      (const int64_t[]){2, 3, 8, 8}, NULL, &complete));
    ck_assert_int_eq(complete, 1);
    assert_inferred(conv, DEFT_ARGUMENTS, 1, 4, SHAPE(4, 3, 3, 3), DEFT_FLOAT32);
    ck_assert_ok(DeftSymbolInferShape(conv, 0, NULL, NULL, NULL, NULL, &complete));
    ck_assert_int_eq(complete, 0);
    assert_inferred(conv, DEFT_ARGUMENTS, 1, 4, SHAPE(4, -1, 3, 3), DEFT_FLOAT32);
    free_symbols(8, (DeftSymbolHandle[]){x, fc, a, b, sum, img, w, conv});
}
END_TEST

/* A graph whose inferred values could not be allocated is refused by
 * inference, before a plan sizes its arena from them. */
START_TEST(test_inferred_byte_size_overflow_is_refused) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle big =
        apply("broadcast_to", "big", 1, &x, P("shape", "(2305843009213693953,)"));
    int complete = -1;
    ck_assert_fails(DeftSymbolInferShape(big, 1, (const char *const[]){"x"}, (const int[]){1},
                                         (const int64_t[]){1}, (const int[]){DEFT_FLOAT64},
                                         &complete),
                    DEFT_ERROR_VALUE,
                    "node 'big': shape (2305843009213693953,) with 8-byte elements needs more");
    ck_assert_int_eq(complete, -1);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(big, 0, &op));
    DeftNDArrayHandle in = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(2));
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    ck_assert_fails(DeftCachedOpInvoke(op, 1, &in, &nout, out), DEFT_ERROR_VALUE, "needs more");
    ck_assert_ptr_null(out[0]);
    ck_assert_ok(DeftCachedOpFree(op));
    ck_assert_ok(DeftNDArrayFree(in));
    free_symbols(2, (DeftSymbolHandle[]){x, big});
}
END_TEST

/* A _CachedOp node holds the graph it names: the graph outlives the
 * executor that registered it, for as long as a node needs it. */
START_TEST(test_cached_op_node_keeps_its_graph) {
    DeftSymbolHandle x = var("x"), e = apply("exp", NULL, 1, &x, NO_PARAMS);
    DeftCachedOpHandle inner;
    ck_assert_ok(DeftCachedOpCreate(e, 0, &inner));
    char json[512];
    snprintf(json, sizeof json,
             "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
             " {\"op\": \"_CachedOp\", \"name\": \"call\", \"attrs\": {\"subgraph\": \"%s\"},"
             " \"inputs\": [[0, 0, 0]]}], \"arg_nodes\": [0], \"heads\": [[1, 0, 0]]}",
             subgraph_id(inner));
    DeftSymbolHandle loaded;
    ck_assert_ok(DeftSymbolCreateFromJSON(json, &loaded));
    DeftCachedOpHandle outer;
    ck_assert_ok(DeftCachedOpCreate(loaded, 0, &outer));
    ck_assert_ok(DeftCachedOpFree(inner)); /* the node still holds the graph */
    free_symbols(2, (DeftSymbolHandle[]){x, e});
    DeftNDArrayHandle in = make(DEFT_FLOAT32, 1, SHAPE(2), VALUES(0, 1));
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    ck_assert_ok(DeftCachedOpInvoke(outer, 1, &in, &nout, out));
    assert_values(out[0], 2, VALUES(1, exp(1.0)), 1e-6);
    ck_assert_ok(DeftCachedOpFree(outer));
    ck_assert_ok(DeftSymbolFree(loaded));
    /* Gone with its last node: a graph naming it no longer loads. */
    ck_assert_fails(DeftSymbolCreateFromJSON(json, &loaded), DEFT_ERROR_PARSE,
                    "no graph is registered as 'sg");
    free_all(2, (DeftNDArrayHandle[]){in, out[0]});
}
END_TEST

/* Values that each fit but together overflow the arena's size are refused
 * when planned (the layout's sum used to overflow, found by fuzz_invoke). */
START_TEST(test_arena_size_overflow_is_refused) {
    DeftSymbolHandle x = var("x");
    const char *const *shape = P("shape", "(576460752303423488,)"); /* 2^59 float64: 2^62 bytes */
    DeftSymbolHandle a = apply("broadcast_to", "a", 1, &x, shape);
    DeftSymbolHandle b = apply("broadcast_to", "b", 1, &x, shape);
    DeftSymbolHandle c = apply("elemwise_add", "c", 2, (DeftSymbolHandle[]){a, b}, NO_PARAMS);
    DeftSymbolHandle s = apply("sum", "s", 1, &c, NO_PARAMS);
    DeftCachedOpHandle op;
    ck_assert_ok(DeftCachedOpCreate(s, 0, &op));
    DeftNDArrayHandle in = make(DEFT_FLOAT64, 1, SHAPE(1), VALUES(2));
    DeftNDArrayHandle out[1] = {NULL};
    int nout = 1;
    ck_assert_fails(DeftCachedOpInvoke(op, 1, &in, &nout, out), DEFT_ERROR_VALUE,
                    "the graph's intermediate values need more than");
    ck_assert_ptr_null(out[0]);
    ck_assert_ok(DeftCachedOpFree(op));
    ck_assert_ok(DeftNDArrayFree(in));
    free_symbols(5, (DeftSymbolHandle[]){x, a, b, c, s});
}
END_TEST

START_TEST(test_infer_shape_errors_name_the_node) {
    DeftSymbolHandle x = var("x"), w = var("w");
    DeftSymbolHandle d = apply("dot", "product", 2, (DeftSymbolHandle[]){x, w}, NO_PARAMS);
    int complete = -1;
    ck_assert_fails(
        DeftSymbolInferShape(d, 2, (const char *const[]){"x", "w"}, (const int[]){2, 2},
                             (const int64_t[]){3, 4, 5, 6}, NULL, &complete),
        DEFT_ERROR_VALUE,
        "DeftSymbolInferShape: node 'product': operator 'dot': input 1 has shape (5,6)");
    ck_assert_fails(DeftSymbolInferShape(d, 1, (const char *const[]){"y"}, (const int[]){1},
                                         (const int64_t[]){3}, NULL, &complete),
                    DEFT_ERROR_VALUE, "names[0] is 'y', which is not an argument");
    ck_assert_fails(DeftSymbolInferShape(d, 1, (const char *const[]){"x"}, (const int[]){1},
                                         (const int64_t[]){-3}, NULL, &complete),
                    DEFT_ERROR_VALUE, "shape of 'x'[0] is -3");
    ck_assert_int_eq(complete, -1);
    int64_t dims[8];
    int ndim, dtype;
    ck_assert_fails(DeftSymbolGetInferredShape(d, DEFT_OUTPUTS, 0, dims, 8, &ndim, &dtype),
                    DEFT_ERROR_VALUE, "no inference has run");
    ck_assert_ok(DeftSymbolInferShape(d, 2, (const char *const[]){"x", "w"}, (const int[]){2, 2},
                                      (const int64_t[]){3, 4, 4, 6}, NULL, &complete));
    ck_assert_fails(DeftSymbolGetInferredShape(d, DEFT_OUTPUTS, 1, dims, 8, &ndim, &dtype),
                    DEFT_ERROR_INDEX, "index is 1, but the group has 1 entries");
    ck_assert_fails(DeftSymbolGetInferredShape(d, 5, 0, dims, 8, &ndim, &dtype), DEFT_ERROR_VALUE,
                    "group is 5");
    ck_assert_fails(DeftSymbolGetInferredShape(d, DEFT_OUTPUTS, 0, dims, 1, &ndim, &dtype),
                    DEFT_ERROR_VALUE, "capacity is 1, but the shape has 2 dimensions");
    free_symbols(3, (DeftSymbolHandle[]){x, w, d});
}
END_TEST

static int count_nodes(DeftSymbolHandle s) {
    DeftSymbolHandle internals;
    int n;
    ck_assert_ok(DeftSymbolGetInternals(s, &internals));
    ck_assert_ok(DeftSymbolGetNumOutputs(internals, &n));
    ck_assert_ok(DeftSymbolFree(internals));
    return n;
}

START_TEST(test_cse_merges_duplicates_and_keeps_random_ops) {
    DeftSymbolHandle x = var("x");
    DeftSymbolHandle e1 = apply("exp", NULL, 1, &x, NO_PARAMS),
                     e2 = apply("exp", NULL, 1, &x, NO_PARAMS);
    DeftSymbolHandle s1 = apply("_plus_scalar", NULL, 1, &e1, P("scalar", "2"));
    DeftSymbolHandle s2 = apply("_plus_scalar", NULL, 1, &e2, P("scalar", "2"));
    DeftSymbolHandle s3 = apply("_plus_scalar", NULL, 1, &e2, P("scalar", "3"));
    DeftSymbolHandle r1 = apply("_random_uniform", NULL, 0, NULL, P("shape", "(2,)"));
    DeftSymbolHandle r2 = apply("_random_uniform", NULL, 0, NULL, P("shape", "(2,)"));
    DeftSymbolHandle group, merged;
    ck_assert_ok(DeftSymbolCreateGroup(5, (DeftSymbolHandle[]){s1, s2, s3, r1, r2}, &group));
    ck_assert_int_eq(count_nodes(group), 8);
    ck_assert_ok(DeftSymbolApplyPasses(group, "CSE", &merged));
    ck_assert_int_eq(count_nodes(merged), 6); /* x, exp, +2, +3, two random */
    int n;
    const char *const *names;
    ck_assert_ok(DeftSymbolListOutputs(merged, &n, &names));
    ck_assert_int_eq(n, 5);
    ck_assert_str_eq(names[0], names[1]); /* both outputs are now one node */
    ck_assert_str_ne(names[3], names[4]);
    ck_assert_int_eq(count_nodes(group), 8); /* the input symbol is unchanged */
    DeftSymbolHandle bad = NULL;
    ck_assert_fails(
        DeftSymbolApplyPasses(group, "CSE,Fusion", &bad), DEFT_ERROR_VALUE,
        "unknown pass 'Fusion' (passes: DCE, CSE, InferShape, Fuse, PlanMemory, Gradient, "
        "PlaceDevice, FoldBatchNorm)");
    ck_assert_ptr_null(bad);
    free_symbols(10, (DeftSymbolHandle[]){x, e1, e2, s1, s2, s3, r1, r2, group, merged});
}
END_TEST

/* Two identical momentum updates are two updates of the momentum (a merge would do one). */
START_TEST(test_cse_keeps_operators_that_update_inputs) {
    DeftSymbolHandle w = var("w"), g = var("g"), m = var("mom"), in[3] = {w, g, m};
    DeftSymbolHandle u1 = apply("sgd_mom_update", NULL, 3, in, P("lr", "0.1", "momentum", "0.9"));
    DeftSymbolHandle u2 = apply("sgd_mom_update", NULL, 3, in, P("lr", "0.1", "momentum", "0.9"));
    DeftSymbolHandle group, merged;
    ck_assert_ok(DeftSymbolCreateGroup(2, (DeftSymbolHandle[]){u1, u2}, &group));
    ck_assert_ok(DeftSymbolApplyPasses(group, "CSE", &merged));
    ck_assert_int_eq(count_nodes(merged), 5); /* w, g, mom, two updates */
    free_symbols(7, (DeftSymbolHandle[]){w, g, m, u1, u2, group, merged});
}
END_TEST

START_TEST(test_dce_drops_unreachable_json_nodes) {
    const char *json = "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\"},"
                       "{\"op\": \"exp\", \"name\": \"unused\", \"inputs\": [[0, 0]]},"
                       "{\"op\": \"negative\", \"name\": \"kept\", \"inputs\": [[0, 0]]}],"
                       "\"heads\": [[2, 0]]}";
    DeftSymbolHandle s, clean;
    ck_assert_ok(DeftSymbolCreateFromJSON(json, &s));
    ck_assert_ok(DeftSymbolApplyPasses(s, "DCE", &clean));
    const char *text;
    ck_assert_ok(DeftSymbolSaveToJSON(clean, &text));
    ck_assert_ptr_null(strstr(text, "unused"));
    ck_assert_ptr_nonnull(strstr(text, "kept"));
    ck_assert_int_eq(count_nodes(clean), 2);
    free_symbols(2, (DeftSymbolHandle[]){s, clean});
}
END_TEST

START_TEST(test_infer_shape_pass_annotates_variables) {
    DeftSymbolHandle x = var("x");
    ck_assert_ok(DeftSymbolSetAttr(x, "__shape__", "(5,3)"));
    DeftSymbolHandle fc = apply("FullyConnected", "fc", 1, &x, P("num_hidden", "4"));
    DeftSymbolHandle annotated, internals, weight;
    ck_assert_ok(DeftSymbolApplyPasses(fc, "InferShape", &annotated));
    ck_assert_ok(DeftSymbolGetInternals(annotated, &internals));
    ck_assert_ok(DeftSymbolGetOutput(internals, 1, &weight));
    const char *value;
    int found;
    ck_assert_ok(DeftSymbolGetAttr(weight, "__shape__", &value, &found));
    ck_assert_int_eq(found, 1);
    ck_assert_str_eq(value, "(4,3)");
    ck_assert_ok(DeftSymbolGetAttr(weight, "__dtype__", &value, &found));
    ck_assert_str_eq(value, "float32");
    free_symbols(5, (DeftSymbolHandle[]){x, fc, annotated, internals, weight});
}
END_TEST

/* Run whatever a mutated graph turned out to be: inference, passes, executor. */
static void exercise(DeftSymbolHandle s) {
    int complete, nargs;
    const char *json;
    if (DeftSymbolInferShape(s, 0, NULL, NULL, NULL, NULL, &complete))
        ck_assert_str_ne(DeftGetLastError(), "");
    ck_assert_ok(DeftSymbolSaveToJSON(s, &json));
    DeftSymbolHandle passed;
    if (DeftSymbolApplyPasses(s, "CSE,Fuse,DCE", &passed) == 0)
        ck_assert_ok(DeftSymbolFree(passed));
    const char *const *names;
    DeftCachedOpHandle exec;
    if (DeftSymbolListArguments(s, &nargs, &names) || nargs > 8 || DeftCachedOpCreate(s, 0, &exec))
        return;
    DeftNDArrayHandle in[8], out[8] = {NULL};
    for (int i = 0; i < nargs; i++)
        ck_assert_ok(
            DeftNDArrayCreate((const int64_t[]){2, 3}, 2, DEFT_FLOAT32, DEFT_CPU, 0, &in[i]));
    int nout = 8;
    if (DeftCachedOpInvoke(exec, nargs, in, &nout, out) == 0) {
        (void)DeftWaitAll(); /* a run may fail (a mutated scalar), never crash */
        for (int o = 0; o < nout; o++) ck_assert_ok(DeftNDArrayFree(out[o]));
    }
    for (int i = 0; i < nargs; i++) ck_assert_ok(DeftNDArrayFree(in[i]));
    ck_assert_ok(DeftCachedOpFree(exec));
}

/* Random edits of a saved graph (fused nodes and gradients included) either
 * load or fail with a message; what loads survives inference, passes and a run. */
START_TEST(test_mutated_json_never_crashes) {
    DeftSymbolHandle x = var("x");
    ck_assert_ok(DeftSymbolSetAttr(x, "__shape__", "(2,3)"));
    DeftSymbolHandle a = apply("_plus_scalar", NULL, 1, &x, P("scalar", "5"));
    DeftSymbolHandle b = apply("elemwise_mul", NULL, 2, (DeftSymbolHandle[]){a, x}, NO_PARAMS);
    DeftSymbolHandle c = apply("FullyConnected", NULL, 1, &b, P("num_hidden", "4"));
    DeftSymbolHandle d = apply("tanh", NULL, 1, &c, NO_PARAMS);
    DeftSymbolHandle fusedsym, grad;
    ck_assert_ok(DeftSymbolApplyPasses(d, "CSE,Fuse", &fusedsym));
    ck_assert_ok(DeftSymbolGradient(fusedsym, 1, (const char *const[]){"x"}, &grad));
    const char *json;
    ck_assert_ok(DeftSymbolSaveToJSON(grad, &json));
    char *base = strdup(json);
    size_t n = strlen(base);
    static const char *const pieces[] = {"-1",
                                         "99999999999",
                                         "\"",
                                         "[",
                                         "]",
                                         "{",
                                         "}",
                                         ",",
                                         "0",
                                         "null",
                                         "\"_fused_elemwise\"",
                                         "t9",
                                         "i7",
                                         ";",
                                         "=",
                                         "(",
                                         ")",
                                         "1e308",
                                         "\"op\"",
                                         "x"};
    uint64_t rng = 1234;
    char *m = malloc(n + 64);
    int loaded = 0;
    for (int it = 0; it < 5000; it++) {
        memcpy(m, base, n + 1);
        for (int k = 0; k < 2; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)(rng >> 33) % strlen(m);
            const char *p = pieces[(rng >> 20) % 20];
            if (rng & 1) { /* insert */
                memmove(m + pos + strlen(p), m + pos, strlen(m + pos) + 1);
                memcpy(m + pos, p, strlen(p));
            } else { /* overwrite one character */
                m[pos] = p[0];
            }
        }
        DeftSymbolHandle s;
        if (DeftSymbolCreateFromJSON(m, &s)) {
            ck_assert_msg(DeftGetLastError()[0] != '\0', "a failed load has no message");
            continue;
        }
        loaded++;
        exercise(s);
        ck_assert_ok(DeftSymbolFree(s));
    }
    ck_assert_int_gt(loaded, 100); /* the edits also make valid graphs to run */
    free(m), free(base);
    free_symbols(7, (DeftSymbolHandle[]){x, a, b, c, d, fusedsym, grad});
}
END_TEST

/* The reference counts of three nodes. */
static void assert_refs(deft_node_t *const *n, int a, int b, int c) {
    ck_assert_int_eq((int)deft_node_refs(n[0]), a);
    ck_assert_int_eq((int)deft_node_refs(n[1]), b);
    ck_assert_int_eq((int)deft_node_refs(n[2]), c);
}

/* x -> a -> b, with the references graphs take (or take over) counted. */
START_TEST(test_graph_references_borrowed_and_taken_over) {
    deft_node_t *x, *a, *b;
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    const deft_op_entry_t *plus = deft_registry_find("_plus_scalar");
    ck_assert_ok(deft_node_new_variable("x", NULL, 0, NULL, NULL, &x));
    ck_assert_ok(deft_node_new_op(plus, NULL, 1, keys, vals, 1, &(deft_entry_t){x, 0}, &a));
    ck_assert_ok(deft_node_new_op(plus, NULL, 1, keys, vals, 1, &(deft_entry_t){a, 0}, &b));
    deft_entry_t out = {b, 0};
    deft_node_t *all[3] = {x, a, b};
    deft_graph_t *g;
    /* borrowed: the walk finds the three nodes and holds none of them */
    ck_assert_ok(deft_graph_build_cut_borrowed(1, &out, NULL, NULL, &g));
    ck_assert_int_eq(g->num_nodes, 3);
    ck_assert_ptr_eq(g->nodes[0], x);
    ck_assert_ptr_eq(g->nodes[2], b);
    assert_refs(all, 2, 2, 1);
    deft_graph_free(g);
    assert_refs(all, 2, 2, 1);
    /* from_order: the caller's references (taken here) become the graph's */
    deft_node_t *nodes[3] = {deft_node_retain(x), deft_node_retain(a), deft_node_retain(b)};
    ck_assert_ok(
        deft_graph_from_order(3, nodes, (const int[]){0, 1}, 1, &out, (const int[]){2}, &g));
    assert_refs(all, 3, 3, 3);
    ck_assert_int_eq(deft_graph_input_entry(g, 2, 0), 1);
    deft_graph_free(g); /* its nodes' references and its output's */
    assert_refs(all, 2, 2, 1);
    deft_node_release(b), deft_node_release(a), deft_node_release(x);
}
END_TEST

static bool is_plus_scalar(const deft_node_t *node, void *ctx) {
    return node->op == ctx;
}

/* A cut walk's leaves: 32 _plus_scalar nodes of x summed pairwise, then with a ranked
 * variable y (which goes first, renumbering the rest): the leaves are the 32, x is not
 * reached, and the table says so of each node. */
START_TEST(test_cut_graph_marks_its_leaves) {
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    const deft_op_entry_t *plus = deft_registry_find("_plus_scalar");
    const deft_op_entry_t *add = deft_registry_find("elemwise_add");
    deft_node_t *x, *y, *level[32];
    ck_assert_ok(deft_node_new_variable("x", NULL, 0, NULL, NULL, &x));
    ck_assert_ok(deft_node_new_variable("y", NULL, 0, NULL, NULL, &y));
    y->arg_rank = 1;
    for (int i = 0; i < 32; i++)
        ck_assert_ok(
            deft_node_new_op(plus, NULL, 1, keys, vals, 1, &(deft_entry_t){x, 0}, &level[i]));
    for (int n = 32; n > 1; n /= 2)
        for (int i = 0; i < n / 2; i++) {
            deft_entry_t in[2] = {{level[2 * i], 0}, {level[2 * i + 1], 0}};
            deft_node_t *sum;
            ck_assert_ok(deft_node_new_op(add, NULL, 0, NULL, NULL, 2, in, &sum));
            deft_node_release(level[2 * i]), deft_node_release(level[2 * i + 1]);
            level[i] = sum;
        }
    deft_node_t *top;
    deft_entry_t in[2] = {{level[0], 0}, {y, 0}};
    ck_assert_ok(deft_node_new_op(add, NULL, 0, NULL, NULL, 2, in, &top));
    deft_node_release(level[0]);
    deft_graph_t *g;
    ck_assert_ok(
        deft_graph_build_cut(1, &(deft_entry_t){top, 0}, is_plus_scalar, (void *)plus, &g));
    ck_assert_int_eq(g->num_nodes, 32 + 31 + 2); /* the leaves, the sums, y and the top */
    ck_assert_ptr_eq(g->nodes[0], y);
    int leaves = 0;
    for (int i = 0; i < g->num_nodes; i++) {
        ck_assert_ptr_ne(g->nodes[i], x);
        ck_assert_int_eq(g->leaf[i], g->nodes[i]->op == plus);
        leaves += g->leaf[i];
    }
    ck_assert_int_eq(leaves, 32);
    deft_graph_free(g);
    deft_node_release(top), deft_node_release(y), deft_node_release(x);
}
END_TEST

/* n variables named v0, v1, ... (references to release). */
static void make_vars(int n, deft_entry_t *out) {
    for (int i = 0; i < n; i++) {
        char name[8] = {'v', (char)('0' + i), 0};
        ck_assert_ok(deft_node_new_variable(name, NULL, 0, NULL, NULL, &out[i].node));
        out[i].index = 0;
    }
}

/* Which values are updated in place and which outputs nobody wants, with and without
 * a node that updates an input or one with two outputs (where these tables say
 * nothing, none is made). */
START_TEST(test_graph_updated_values_and_unwanted_outputs) {
    deft_entry_t v[5];
    deft_node_t *plus, *bn, *split;
    const char *keys[1] = {"scalar"}, *vals[1] = {"1"};
    make_vars(5, v);
    ck_assert_ok(
        deft_node_new_op(deft_registry_find("_plus_scalar"), NULL, 1, keys, vals, 1, v, &plus));
    ck_assert_ok(deft_node_new_op(deft_registry_find("BatchNorm"), NULL, 0, NULL, NULL, 5, v, &bn));
    keys[0] = "num_outputs", vals[0] = "2";
    ck_assert_ok(
        deft_node_new_op(deft_registry_find("SliceChannel"), NULL, 1, keys, vals, 1, v, &split));
    deft_graph_t *g;
    /* v0 -> _plus_scalar: nothing updated, nothing unwanted */
    ck_assert_ok(deft_graph_build(1, &(deft_entry_t){plus, 0}, &g));
    ck_assert(!deft_graph_is_updated_at(g, 0) && !deft_graph_is_auxiliary_at(g, 0));
    ck_assert_ptr_null(deft_graph_unwanted_outputs(g));
    deft_graph_free(g);
    /* BatchNorm: v3 and v4 (its moving statistics) are updated, and only updated */
    ck_assert_ok(deft_graph_build(1, &(deft_entry_t){bn, 0}, &g));
    for (int i = 0; i < 5; i++) {
        int id = deft_graph_node_id(g, v[i].node);
        ck_assert_int_eq(deft_graph_is_updated_at(g, id), i >= 3);
        ck_assert_int_eq(deft_graph_is_auxiliary_at(g, id), i >= 3);
    }
    deft_graph_free(g);
    /* SliceChannel's second output, read by nobody, is unwanted */
    ck_assert_ok(deft_graph_build(1, &(deft_entry_t){split, 0}, &g));
    const uint64_t *unwanted = deft_graph_unwanted_outputs(g);
    ck_assert_ptr_nonnull(unwanted);
    ck_assert_int_eq(unwanted[deft_graph_node_id(g, split)], 2);
    ck_assert_int_eq(unwanted[deft_graph_node_id(g, v[0].node)], 0);
    deft_graph_free(g);
    deft_node_release(plus), deft_node_release(bn), deft_node_release(split);
    for (int i = 0; i < 5; i++) deft_node_release(v[i].node);
}
END_TEST

static Suite *symbol_suite(void) {
    Suite *suite = suite_create("symbols");
    TCase *tc = tcase_create("symbol");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_compose_creates_missing_inputs_with_deterministic_names);
    tcase_add_test(tc, test_named_inputs_group_internals_children_outputs);
    tcase_add_test(tc, test_compose_rejects_bad_inputs);
    tcase_add_test(tc, test_attributes_copy_on_write);
    tcase_add_test(tc, test_json_round_trip_for_every_operator);
    tcase_add_test(tc, test_loads_mxnet_layout_mlp);
    tcase_add_test(tc, test_malformed_json_fails_cleanly_with_a_path);
    tcase_add_test(tc, test_json_rows_may_count_other_hidden_outputs);
    tcase_add_test(tc, test_zero_dims_of_creation_operators_are_inferred);
    tcase_add_test(tc, test_files_and_file_errors);
    tcase_add_test(tc, test_file_that_is_no_symbol_is_refused_by_what_it_is);
    tcase_add_test(tc, test_long_chain_is_indexed_and_freed_without_recursion);
    tcase_add_test(tc, test_graph_references_borrowed_and_taken_over);
    tcase_add_test(tc, test_graph_updated_values_and_unwanted_outputs);
    tcase_add_test(tc, test_infer_shape_forward_and_backward);
    tcase_add_test(tc, test_infer_partial_shapes);
    tcase_add_test(tc, test_infer_shape_errors_name_the_node);
    tcase_add_test(tc, test_inferred_byte_size_overflow_is_refused);
    tcase_add_test(tc, test_cached_op_node_keeps_its_graph);
    tcase_add_test(tc, test_arena_size_overflow_is_refused);
    tcase_add_test(tc, test_cse_merges_duplicates_and_keeps_random_ops);
    tcase_add_test(tc, test_cse_keeps_operators_that_update_inputs);
    tcase_add_test(tc, test_dce_drops_unreachable_json_nodes);
    tcase_add_test(tc, test_infer_shape_pass_annotates_variables);
    tcase_add_test(tc, test_mutated_json_never_crashes);
    tcase_add_test(tc, test_cut_graph_marks_its_leaves);
    suite_add_tcase(suite, tc);
    return suite;
}

int main(void) {
    return run_suite(symbol_suite());
}
