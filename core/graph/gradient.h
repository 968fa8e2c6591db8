/*
 * The gradient pass: given a symbol and the arguments to differentiate,
 * build the backward graph in reverse topological order, summing the
 * gradients that meet at an entry (one ElementWiseSum for up to 8 terms, a
 * chain of in-place _grad_add above, as MXNet does). Every operator's
 * gradient is built from ordinary operators, so the result can be
 * differentiated again.
 *
 * The new symbol's outputs are the original outputs, then the gradient of
 * each requested argument; its extra arguments are the head gradients, one
 * variable per output named "<output>_head_grad".
 */
#ifndef DEFT_CORE_GRADIENT_H
#define DEFT_CORE_GRADIENT_H

#include "core/graph/symbol.h"

/*
 * The core of the pass, on an indexed graph (which may be cut: its leaves
 * are constants). head_grads[o] is the gradient of output o (borrowed; a
 * NULL node: none). out[w] receives the gradient of node wrt_ids[w]'s
 * output 0 (a new reference), or a NULL node when no output depends on it.
 */
int deft_gradient_entries(const deft_graph_t *g, const deft_entry_t *head_grads, int num_wrt,
                          const int *wrt_ids, deft_entry_t *out);

int deft_symbol_gradient(const deft_symbol_t *sym, int num_wrt, const char *const *wrt,
                         deft_symbol_t **out);
/* The gradient with respect to every argument (not the auxiliary states), in list order. */
int deft_symbol_gradient_all(const deft_symbol_t *sym, deft_symbol_t **out);

#endif
