/*
 * Fusing a softmax cross-entropy loss's gradient. nn.SoftmaxCrossEntropyLoss
 * computes -pick(log_softmax(x), label); differentiated (gather.c's and
 * softmax.c's gradients), that is
 *
 *     a  = _backward_pick(negative(h), label, y)     y = log_softmax(x)
 *     dx = elemwise_sub(a, broadcast_mul(exp(y), sum(a, axis, keepdims=true)))
 *
 * six nodes, the sum and product over full-size temporaries. Where nothing
 * else reads the intermediates (nor is one a graph output), dx becomes one
 * _backward_pick_log_softmax(h, label, y) node, which computes the same
 * elements in the same order. The sum must run along pick's axis (the same
 * attribute text: log_softmax's and pick's axis written alike), so that
 * each line's sum is the one picked gradient. y need not be log_softmax's:
 * the identity holds for any y.
 */
#include <string.h>

#include "core/graph/fuse_loss.h"
#include "core/op/registry.h"

static bool same_entry(deft_entry_t a, deft_entry_t b) {
    return a.node == b.node && a.index == b.index;
}

/* Whether s sums a along a's pick axis, keeping it: sum(a, axis, keepdims=true). */
static bool sums_pick_axis(const deft_node_t *s, const deft_node_t *pick) {
    const char *axis = deft_node_attr(s, "axis"), *keep = deft_node_attr(s, "keepdims");
    const char *pick_axis = deft_node_attr(pick, "axis");
    return s->attrs.count == 2 && axis && keep && strcmp(keep, "true") == 0 &&
           strcmp(axis, pick_axis ? pick_axis : "-1") == 0 &&
           same_entry(s->inputs[0], (deft_entry_t){(deft_node_t *)pick, 0});
}

int deft_fuse_loss_node(const deft_graph_t *g, const int *readers, int i, deft_node_t **out) {
    const deft_node_t *n = g->nodes[i], *a, *mul, *e, *s, *neg;
    if (!deft_fuse_is_op(n, "elemwise_sub") || n->inputs[0].index != 0 ||
        !deft_fuse_is_op(a = n->inputs[0].node, "_backward_pick") ||
        !(mul = deft_fuse_sole_input(g, readers, i, 1, "broadcast_mul")))
        return 0;
    int mul_id = deft_graph_node_id(g, mul), a_id = deft_graph_node_id(g, a);
    /* a's two readers: n and the sum */
    if (readers[deft_graph_entry_id(g, a_id, 0)] != 2 ||
        !(e = deft_fuse_sole_input(g, readers, mul_id, 0, "exp")) ||
        !(s = deft_fuse_sole_input(g, readers, mul_id, 1, "sum")) ||
        !same_entry(e->inputs[0], a->inputs[2]) || !sums_pick_axis(s, a) ||
        !(neg = deft_fuse_sole_input(g, readers, a_id, 0, "negative")))
        return 0;
    deft_entry_t in[3] = {neg->inputs[0], a->inputs[1], a->inputs[2]};
    return deft_node_new_op(deft_registry_find("_backward_pick_log_softmax"), n->name,
                            a->attrs.count, (const char *const *)a->attrs.keys,
                            (const char *const *)a->attrs.vals, 3, in, out);
}
