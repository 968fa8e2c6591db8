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

int deft_symbol_gradient(const deft_symbol_t *sym, int num_wrt, const char *const *wrt,
                         deft_symbol_t **out);
/* The gradient with respect to every argument (not the auxiliary states), in list order. */
int deft_symbol_gradient_all(const deft_symbol_t *sym, deft_symbol_t **out);

#endif
