/*
 * Exporting a recorded graph as a symbol, binding arrays to graph
 * variables, and forgetting recorded history.
 *
 * Export copies the recorded nodes between the inputs and the outputs into
 * new nodes (recorded nodes are shared with live arrays and never change),
 * with each input entry replaced by a variable named after it. The walk is
 * a cut graph (graph.h): no recursion, so a chain of a million recorded
 * calls exports like a short one.
 *
 * A graph recorded in predict mode exports as an inference graph: a Dropout
 * that drops in training only (mode=training) is the identity there, and is
 * left out, its output standing for its input (mode=always stays).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/graph/subgraph.h"
#include "core/imperative/deferred.h"
#include "core/imperative/record.h"

typedef struct export_state {
    int nin;
    deft_ndarray_t *const *in;
    const char *const *in_names;
    deft_node_t **in_vars; /* per input: its variable in the symbol */
    bool *in_used;
    deft_graph_t *g;
    deft_node_t **copies;           /* per node of g: its copy (owned), or NULL */
    int undescribed;                /* copies whose recorded output descriptions are unknown */
    int num_copies, copied_entries; /* copies made (copy_node), and their outputs */
    /* The index of a plain copy's graph (plain_copy), written as the copies are made:
     * its nodes (the inputs' variables, then the copies), per input of a copy the entry
     * id it reads (in_entry, num_read of them), per entry of g its id there (now: a
     * copy's output, or the input it is), per node of g its copy's id (id_of), and the
     * types (new_types), NULL when they cannot be had. Thrown away when the copies are
     * not the whole graph. */
    deft_node_t **order;
    int *now, *in_entry, *id_of, num_read;
    deft_symbol_types_t *types;
    void *tables;         /* the allocation of the per-node and per-entry tables (new_tables) */
    const char **name_of; /* per node of g: the name its copy takes, or NULL (name_copies) */
    /* per entry of g: what stands for it in the symbol (a copy's output, an inlined
     * executor call's, a left-out Dropout's input), or a NULL node */
    deft_entry_t *stand;
    int num_made, made_cap; /* nodes made by inlining, released at the end */
    deft_node_t **made;
    /* _CachedOp, looked up once per export: a lookup by name for every node
     * (deft_subgraph_of_node) was a fifth of the export of a 100-node chain */
    const deft_op_entry_t *cached_op;
    const deft_op_t *dropout; /* the same for Dropout (is_skipped): compared by pointer */
    bool reshaped; /* a node was left out or inlined: the copies are not the whole graph */
} export_state_t;

static int input_of_entry(const export_state_t *s, const deft_entry_t *e) {
    for (int i = 0; i < s->nin; i++)
        if (s->in[i]->entry.node == e->node && s->in[i]->entry.index == e->index) return i;
    return -1;
}

static bool is_input_node(const deft_node_t *node, void *ctx) {
    const export_state_t *s = ctx;
    for (int i = 0; i < s->nin; i++)
        if (s->in[i]->entry.node == node) return true;
    return false;
}

/* Names (when given) are non-empty and distinct. */
static int check_names(int n, const char *const *names, const char *what) {
    for (int i = 0; names && i < n; i++) {
        if (!names[i] || !*names[i])
            return deft_error(DEFT_ERR_VALUE, "%s[%d] is empty or NULL, expected a name", what, i);
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return deft_error(DEFT_ERR_VALUE, "%s[%d] and %s[%d] are both named '%s'", what, j,
                                  what, i, names[i]);
    }
    return 0;
}

/* The input that `arr` is (the same array, or the same recorded value), or -1. */
static int input_of_array(int nin, deft_ndarray_t *const *in, const deft_ndarray_t *arr) {
    for (int i = 0; i < nin; i++)
        if (in[i] == arr || (arr->entry.node && in[i]->entry.node == arr->entry.node &&
                             in[i]->entry.index == arr->entry.index))
            return i;
    return -1;
}

static int check_arrays(int nin, deft_ndarray_t *const *in, int nout, deft_ndarray_t *const *out) {
    for (int k = 0; k < nout; k++)
        if ((!out[k]->entry.node || !out[k]->entry.node->op) && input_of_array(nin, in, out[k]) < 0)
            return deft_error(DEFT_ERR_VALUE,
                              "outputs[%d] was not recorded: it was made outside deferred compute "
                              "and is not an input",
                              k);
    for (int i = 0; i < nin; i++)
        for (int j = 0; j < i; j++)
            if (in[i] == in[j] || (in[i]->entry.node && in[i]->entry.node == in[j]->entry.node &&
                                   in[i]->entry.index == in[j]->entry.index))
                return deft_error(DEFT_ERR_VALUE, "inputs[%d] and inputs[%d] are the same array", j,
                                  i);
    return 0;
}

/* The entry that stands for `e` in the symbol (borrowed), or a NULL node with
 * an error naming where `e` is used: input k of `consumer`, or outputs[k].
 * `entry` is e's entry id in s->g (from the walk's tables: no lookup by node). */
static deft_entry_t substitute(export_state_t *s, const deft_entry_t *e, int entry,
                               const deft_node_t *consumer, int k) {
    /* Most entries have a stand-in, and no input's has one (an input's node is a leaf of
     * the walk, never copied): that looked up first, the scan of the inputs is left to
     * the few entries without one. */
    if (s->stand[entry].node) return s->stand[entry];
    int input = input_of_entry(s, e);
    if (input >= 0) {
        s->in_used[input] = true;
        s->now[entry] = input; /* the input's variable: id `input` in a plain copy's index */
        return (deft_entry_t){s->in_vars[input], 0};
    }
    char where[96];
    if (consumer)
        snprintf(where, sizeof where, "input %d of a recorded '%s'", k, consumer->op->op->name);
    else
        snprintf(where, sizeof where, "outputs[%d]", k);
    if (!e->node->op)
        deft_error(DEFT_ERR_VALUE,
                   s->nin == 0 ? "%s is an array that is not bound to a variable "
                                 "(DeftNDArraySetDeferredComputeVariable)"
                               : "%s is an array that is neither computed from the inputs nor "
                                 "listed as an input",
                   where);
    else
        deft_error(DEFT_ERR_VALUE,
                   "%s is output %d of a '%s' whose other output is an input; list that output "
                   "as an input too",
                   where, e->index, e->node->op->op->name);
    return (deft_entry_t){NULL, 0};
}

/* A Dropout that drops in training mode only (mode=training, the default). */
static bool drops_in_training_only(const export_state_t *s, const deft_node_t *node) {
    if (!node->op || node->op->op != s->dropout) return false; /* most nodes: two loads */
    const char *mode = deft_node_attr(node, "mode");
    return !mode || strcmp(mode, "training") == 0;
}

static bool recorded_in_predict_mode(const deft_node_t *node) {
    const deft_record_t *rec = deft_record_of(node);
    return rec && !rec->training;
}

static bool is_skipped(const export_state_t *s, const deft_node_t *node) {
    return drops_in_training_only(s, node) && recorded_in_predict_mode(node);
}

/* A recorded Dropout left out of an inference graph: its outputs stand for
 * its input (its hidden mask output, all ones in predict mode, has no reader
 * in a recorded forward graph). */
static int skip_dropout(export_state_t *s, int id) {
    const deft_node_t *node = s->g->nodes[id];
    s->reshaped = true;
    deft_entry_t data =
        substitute(s, &node->inputs[0], deft_graph_input_entry(s->g, id, 0), node, 0);
    if (!data.node) return -1;
    for (int k = 0; k < node->num_outputs; k++) s->stand[s->g->row_ptr[id] + k] = data;
    return 0;
}

/* Copy a variable leaf (outputs-only form): a fresh variable of the same name. */
static int copy_variable(export_state_t *s, int id) {
    const deft_node_t *node = s->g->nodes[id];
    if (deft_node_new_variable(node->name, NULL, 0, NULL, NULL, &s->copies[id])) return -1;
    s->stand[s->g->row_ptr[id]] = (deft_entry_t){s->copies[id], 0};
    return 0;
}

/* The descriptions of a recorded node's outputs, if its record has them all and
 * an executor's inference would find the same: a creation operator's zero
 * dimensions are open there (infer.c), to be filled by its consumers. */
static const deft_desc_t *recorded_desc(const deft_node_t *node) {
    const deft_record_t *rec = deft_record_of(node);
    if (!rec || !rec->desc || rec->num_outputs != node->num_outputs) return NULL;
    for (int k = 0; node->num_inputs == 0 && k < node->num_outputs; k++)
        for (int d = 0; d < rec->desc[k].shape.ndim; d++)
            if (rec->desc[k].shape.dims[d] == 0) return NULL;
    return rec->desc;
}

/* Node id's copy, standing for its outputs; in the index of a plain copy (s->order)
 * node n, its outputs from entry e on, with their recorded descriptions where the
 * types want them. The tables in locals: the stores could alias s's fields. */
static void place_copy(export_state_t *s, int id, deft_node_t *copy) {
    const deft_graph_t *g = s->g;
    int n = s->nin + s->num_copies, e = s->nin + s->copied_entries, width = copy->num_outputs;
    int first = g->row_ptr[id], *now = s->now;
    deft_entry_t *stand = s->stand;
    for (int k = 0; k < width; k++)
        stand[first + k] = (deft_entry_t){copy, k}, now[first + k] = e + k;
    s->copies[id] = copy, s->order[n] = copy, s->id_of[id] = n;
    s->num_copies++, s->copied_entries += width;
    const deft_desc_t *desc = recorded_desc(g->nodes[id]);
    deft_symbol_types_t *t = s->types;
    s->undescribed += !desc;
    if (!t || !desc) return;
    t->nodes[n] = copy, t->first[n] = e;
    for (int k = 0; k < width; k++) t->desc[e + k] = desc[k];
}

static int copy_node(export_state_t *s, int id, const char *name) {
    const deft_graph_t *g = s->g;
    const deft_node_t *node = g->nodes[id];
    const int *reads = &g->in_entry[g->in_ptr[id]];
    deft_entry_t inputs[DEFT_OP_MAX_INPUTS];
    for (int k = 0; k < node->num_inputs; k++) {
        inputs[k] = substitute(s, &node->inputs[k], reads[k], node, k);
        if (!inputs[k].node) return -1;
        s->in_entry[s->num_read + k] = s->now[reads[k]]; /* set: substitute found it */
    }
    deft_node_t *copy;
    if (deft_node_copy_op(node, name, inputs, &copy)) return -1;
    s->num_read += node->num_inputs;
    place_copy(s, id, copy);
    return 0;
}

/* The names the copies take, when outputs are named (s->name_of): a node's is the
 * first output name among its outputs. Found once from the roots' node ids: a scan of
 * the outputs for every node copied cost more than the table. */
static int name_copies(export_state_t *s, int nout, deft_ndarray_t *const *out,
                       const char *const *out_names) {
    if (!out_names) return 0;
    for (int k = 0, root = 0; k < nout; k++) {
        if (input_of_array(s->nin, s->in, out[k]) >= 0) continue; /* not a root of the walk */
        int id = s->g->output_ids[root++];
        if (!s->name_of[id]) s->name_of[id] = out_names[k];
    }
    return 0;
}

static int keep_made(export_state_t *s, deft_node_t *node) {
    if (s->num_made == s->made_cap) {
        int cap = s->made_cap ? 2 * s->made_cap : 16;
        deft_node_t **grown = realloc(s->made, (size_t)cap * sizeof *grown);
        if (!grown) {
            deft_node_release(node);
            return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an export");
        }
        s->made = grown, s->made_cap = cap;
    }
    s->made[s->num_made++] = node;
    return 0;
}

/* One node of an executor's graph, inlined: its inputs through `map`
 * (`predict`: the executor's call was recorded in predict mode). */
static int inline_node(export_state_t *s, const deft_graph_t *sub, int i, deft_entry_t *map,
                       bool predict) {
    const deft_node_t *node = sub->nodes[i];
    deft_entry_t inputs[DEFT_OP_MAX_INPUTS];
    deft_node_t *copy;
    for (int k = 0; k < node->num_inputs; k++) inputs[k] = map[deft_graph_input_entry(sub, i, k)];
    if (predict && drops_in_training_only(s, node)) {
        for (int k = 0; k < node->num_outputs; k++) map[sub->row_ptr[i] + k] = inputs[0];
        return 0;
    }
    if (deft_node_copy_op(node, NULL, inputs, &copy) || keep_made(s, copy)) return -1;
    for (int k = 0; k < node->num_outputs; k++) map[sub->row_ptr[i] + k] = (deft_entry_t){copy, k};
    return 0;
}

/* A recorded executor call (_CachedOp) exports as its graph, inlined, so
 * the symbol stands alone (its JSON names no process-local graph). */
static int inline_call(export_state_t *s, int id) {
    const deft_node_t *node = s->g->nodes[id];
    s->reshaped = true;
    const deft_subgraph_t *sg = deft_subgraph_of_node(node);
    const deft_symbol_t *sym = deft_subgraph_symbol(sg);
    deft_graph_t *sub;
    if (deft_graph_build_cut(sym->num_outputs, sym->outputs, NULL, NULL, &sub)) return -1;
    deft_entry_t *map = calloc((size_t)deft_graph_num_entries(sub) + 1, sizeof *map);
    int status = map ? 0 : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate");
    for (int i = 0; status == 0 && i < sub->num_nodes; i++) {
        const deft_node_t *inner = sub->nodes[i];
        if (inner->op) {
            status = inline_node(s, sub, i, map, recorded_in_predict_mode(node));
            continue;
        }
        int k = deft_subgraph_input_of(sg, inner);
        map[sub->row_ptr[i]] =
            substitute(s, &node->inputs[k], deft_graph_input_entry(s->g, id, k), node, k);
        if (!map[sub->row_ptr[i]].node) status = -1;
    }
    for (int o = 0; status == 0 && o < sym->num_outputs; o++)
        s->stand[s->g->row_ptr[id] + o] = map[deft_graph_output_entry(sub, o)];
    free(map);
    deft_graph_free(sub);
    return status;
}

static int copy_graph(export_state_t *s) {
    const deft_graph_t *g = s->g;
    for (int i = 0; i < g->num_nodes; i++) {
        const deft_node_t *node = g->nodes[i];
        if (deft_graph_is_leaf(g, i)) {
            if (!node->op && s->nin == 0 && node->name && copy_variable(s, i)) return -1;
            continue;
        }
        bool call = node->op == s->cached_op && deft_subgraph_of_node(node);
        int status = call                  ? inline_call(s, i)
                     : is_skipped(s, node) ? skip_dropout(s, i)
                                           : copy_node(s, i, s->name_of ? s->name_of[i] : NULL);
        if (status) return -1;
    }
    for (int i = 0; i < s->nin; i++)
        if (!s->in_used[i])
            return deft_error(DEFT_ERR_VALUE, "inputs[%d] ('%s') is connected to no output", i,
                              s->in_names[i]);
    return 0;
}

static int make_input_vars(export_state_t *s) {
    for (int i = 0; i < s->nin; i++) {
        if (deft_node_new_variable(s->in_names[i], NULL, 0, NULL, NULL, &s->in_vars[i])) return -1;
        s->in_vars[i]->arg_rank = i + 1; /* list_arguments: the inputs in the order given */
    }
    return 0;
}

/*
 * Output k stands for entries[k]: a variable (an input listed as an output),
 * an entry an earlier output already stands for, or (with names) the input
 * of a Dropout left out, becomes a _copy of it named as asked, so that every
 * output keeps its own name (as MXNet's export does).
 */
static int own_output(export_state_t *s, deft_entry_t *entries, int k, bool skipped,
                      const char *const *out_names) {
    bool shared = !entries[k].node->op || (skipped && out_names);
    for (int j = 0; !shared && j < k; j++)
        shared = entries[j].node == entries[k].node && entries[j].index == entries[k].index;
    if (!shared) return 0;
    deft_node_t *copy;
    if (deft_node_new_op(deft_registry_find("_copy"), out_names ? out_names[k] : NULL, 0, NULL,
                         NULL, 1, &entries[k], &copy) ||
        keep_made(s, copy))
        return -1;
    entries[k] = (deft_entry_t){copy, 0};
    return 0;
}

/* Whether the symbol's graph is the inputs' variables and a copy of every
 * recorded node: then it is known without a walk. */
static bool plain_copy(const export_state_t *s) {
    return s->nin > 0 && !s->reshaped && s->num_made == 0;
}

/* What the recording knew of the symbol's values (symbol.h), for a plain copy's
 * graph (plain_copy): room for the inputs' variables and a copy of every node of g,
 * the inputs' written here, the copies' as they are made (place_copy). NULL when
 * out of memory, which is no error: it only costs an executor's inference. */
static deft_symbol_types_t *new_types(const export_state_t *s) {
    deft_symbol_types_t *t =
        deft_symbol_types_new(s->nin + s->g->num_nodes, s->nin + deft_graph_num_entries(s->g));
    for (int i = 0; t && i < s->nin; i++) {
        t->nodes[i] = s->in_vars[i], t->first[i] = i;
        t->desc[i] = (deft_desc_t){s->in[i]->tensor.shape, s->in[i]->tensor.dtype};
    }
    return t;
}

/* The export's tables over the walk's graph g, in one allocation (they had one each,
 * calloc's, which takes no thread cache: 20 instructions per node of a 100-node chain's
 * export), and the index's types. Zeroed where read before written, each on its own
 * (a memset of the whole block would pass over its larger part for nothing): `now`
 * too, as an entry that a left-out Dropout or an inlined call stands for has no id in
 * a plain copy's index, and a copy reading it copies a zero into a table that is then
 * thrown away. */
static int new_tables(export_state_t *s, bool named) {
    const deft_graph_t *g = s->g;
    size_t nodes = (size_t)g->num_nodes + 1, entries = (size_t)deft_graph_num_entries(g) + 1;
    size_t reads = (size_t)g->in_ptr[g->num_nodes], order = (size_t)s->nin + nodes;
    size_t bytes = entries * sizeof *s->stand + (2 * nodes + order) * sizeof(void *) +
                   (entries + reads + nodes + (size_t)g->num_outputs) * sizeof(int);
    char *at = s->tables = malloc(bytes);
    if (!at) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an export");
    s->stand = memset(at, 0, entries * sizeof *s->stand), at += entries * sizeof *s->stand;
    s->copies = memset(at, 0, nodes * sizeof *s->copies), at += nodes * sizeof *s->copies;
    s->name_of = named ? memset(at, 0, nodes * sizeof *s->name_of) : NULL;
    at += nodes * sizeof *s->name_of;
    s->order = (deft_node_t **)at, at += order * sizeof *s->order;
    s->now = memset(at, 0, entries * sizeof *s->now);
    s->in_entry = s->now + entries, s->id_of = s->in_entry + reads;
    s->types = new_types(s);
    return 0;
}

/*
 * The index of a plain copy's graph (plain_copy), as deft_graph_build_unnamed
 * would make it, from what the copies wrote (place_copy): the same walk over
 * the copies meets the nodes in the same order, the inputs' variables in place
 * of the walk's leaves, and those (ranked) go first. So the order is the
 * variables by rank, then the copies in the walk's order. The index takes over
 * the export's references to the variables and copies (s->in_vars emptied,
 * s->copies freed). NULL when out of memory (an executor walks). The types are
 * the symbol's when every copy had its descriptions (s->types taken).
 */
static deft_graph_t *index_copy(export_state_t *s, deft_symbol_t *sym) {
    int n = s->nin + s->num_copies, *out_ids = s->id_of + s->g->num_nodes;
    if (s->types && s->undescribed == 0) {
        s->types->num_nodes = n; /* room was made for every node of g: the copies are fewer */
        s->types->first[n] = s->nin + s->copied_entries;
        sym->types = s->types;
        s->types = NULL;
    }
    for (int o = 0; o < sym->num_outputs; o++) out_ids[o] = s->id_of[s->g->output_ids[o]];
    deft_graph_t *index = NULL;
    if (deft_graph_from_order(n, s->order, s->in_entry, sym->num_outputs, sym->outputs, out_ids,
                              &index))
        return NULL;
    for (int i = 0; i < s->nin; i++) s->in_vars[i] = NULL;
    s->copies = NULL; /* the copies are the index's now: none left to release, one by one */
    return index;
}

static int export_locked(export_state_t *s, int nout, deft_ndarray_t *const *out,
                         const char *const *out_names, deft_symbol_t **sym) {
    deft_entry_t roots[DEFT_OP_MAX_OUTPUTS], *heap = NULL, *entries = roots;
    if (nout > DEFT_OP_MAX_OUTPUTS && !(entries = heap = malloc((size_t)nout * sizeof *heap)))
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an export");
    int num_roots = 0; /* the outputs to compute: not the inputs listed as outputs */
    for (int k = 0; k < nout; k++)
        if (input_of_array(s->nin, s->in, out[k]) < 0) entries[num_roots++] = out[k]->entry;
    /* borrowed: the arrays the caller passed hold the recorded nodes, and the lock keeps
     * their entries as they are, for as long as the export uses the walk */
    int status = deft_graph_build_cut_borrowed(num_roots, entries, is_input_node, s, &s->g);
    if (status == 0) status = make_input_vars(s);
    if (status == 0) status = new_tables(s, out_names != NULL);
    for (int i = 0; status == 0 && i < s->nin; i++) s->order[i] = s->in_vars[i];
    if (status == 0) status = name_copies(s, nout, out, out_names);
    if (status == 0) status = copy_graph(s);
    for (int k = 0, root = 0; status == 0 && k < nout; k++) {
        int i = input_of_array(s->nin, s->in, out[k]);
        if (i >= 0) s->in_used[i] = true;
        entries[k] =
            i >= 0 ? (deft_entry_t){s->in_vars[i], 0}
                   : substitute(s, &out[k]->entry, deft_graph_output_entry(s->g, root++), NULL, k);
        if (!entries[k].node ||
            own_output(s, entries, k, i < 0 && is_skipped(s, out[k]->entry.node), out_names))
            status = -1;
    }
    if (status == 0) status = deft_symbol_from_entries(nout, entries, sym);
    if (status == 0 && plain_copy(s)) atomic_store(&(*sym)->graph, index_copy(s, *sym));
    free(heap);
    return status;
}

int deft_deferred_export(int nin, deft_ndarray_t *const *in, const char *const *in_names, int nout,
                         deft_ndarray_t *const *out, const char *const *out_names,
                         deft_symbol_t **sym) {
    if (nin > 0 && !in_names)
        return deft_error(DEFT_ERR_VALUE, "input_names is NULL, expected a name per input");
    if (check_names(nin, in_names, "input_names") || check_names(nout, out_names, "output_names"))
        return -1;
    static _Atomic(const deft_op_entry_t *) dropout_entry, cached_op_entry;
    const deft_op_entry_t *dropout = deft_registry_find_kept("Dropout", &dropout_entry);
    export_state_t s = {.nin = nin,
                        .in = in,
                        .in_names = in_names,
                        .cached_op = deft_registry_find_kept("_CachedOp", &cached_op_entry),
                        .dropout = dropout ? dropout->op : NULL};
    size_t vars = ((size_t)nin + 1) * sizeof *s.in_vars, bytes = vars + (size_t)nin + 1;
    if (!(s.in_vars = malloc(bytes))) /* with in_used: one allocation */
        return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate an export");
    memset(s.in_vars, 0, bytes);
    s.in_used = (bool *)((char *)s.in_vars + vars);
    deft_record_lock();
    int status =
        check_arrays(nin, in, nout, out) ? -1 : export_locked(&s, nout, out, out_names, sym);
    deft_record_unlock();
    for (int i = 0; s.g && s.copies && i < s.g->num_nodes; i++) deft_node_release(s.copies[i]);
    for (int i = 0; i < s.num_made; i++) deft_node_release(s.made[i]);
    for (int i = 0; i < nin; i++) deft_node_release(s.in_vars[i]);
    deft_graph_free(s.g);
    deft_symbol_types_release(s.types);
    free(s.tables), free(s.made), free(s.in_vars);
    return status;
}

/* ---- binding and clearing ---- */

static int bind_one(deft_ndarray_t *arr, const char *name, int i) {
    deft_node_t *node = arr->entry.node;
    if (!node) return deft_record_variable(arr, name);
    if (node->op)
        return deft_error(DEFT_ERR_VALUE,
                          "arrays[%d] is the result of a recorded operation; only arrays made "
                          "outside deferred compute can be bound to variables",
                          i);
    if (!node->name)
        return (node->name = strdup(name))
                   ? 0
                   : deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a name");
    if (strcmp(node->name, name) == 0) return 0;
    return deft_error(DEFT_ERR_VALUE,
                      "arrays[%d] is already bound to variable '%s'; it cannot be rebound to '%s'",
                      i, node->name, name);
}

int deft_deferred_bind(int n, deft_ndarray_t *const *arrays, const char *const *names) {
    if (check_names(n, names, "variable names")) return -1;
    deft_record_lock();
    int status = 0;
    for (int i = 0; status == 0 && i < n; i++) status = bind_one(arrays[i], names[i], i);
    deft_record_unlock();
    return status;
}

int deft_deferred_clear(int n, deft_ndarray_t *const *arrays) {
    if (deft_deferred_compute(n, arrays)) return -1;
    deft_record_lock();
    for (int i = 0; i < n; i++) {
        deft_ndarray_t *arr = arrays[i];
        if (!arr->entry.node) continue;
        deft_record_set_entry(arr, (deft_entry_t){NULL, 0});
    }
    deft_record_unlock();
    return 0;
}
