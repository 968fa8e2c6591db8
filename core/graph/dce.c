/*
 * Dead-code elimination. A deft graph holds only what its outputs reach, so
 * indexing it is the whole pass: nodes nothing depends on (a JSON file may
 * list them, or a larger graph may have held them) are left behind.
 */
#include "core/graph/pass.h"

int deft_pass_dce(const deft_symbol_t *in, deft_symbol_t **out) {
    deft_graph_t *g;
    if (deft_graph_build(in->num_outputs, in->outputs, &g)) return -1;
    int status = deft_symbol_from_entries(g->num_outputs, g->outputs, out);
    deft_graph_free(g);
    return status;
}
