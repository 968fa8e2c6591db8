/*
 * Symbols as JSON, in MXNet's symbol-JSON layout, so graphs move between
 * deft and MXNet 1.x:
 *
 *   {"nodes": [{"op": "null", "name": "x", "inputs": []},
 *              {"op": "FullyConnected", "name": "fc", "attrs": {"num_hidden": "8"},
 *               "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]}, ...],
 *    "arg_nodes": [0, 1, 2], "node_row_ptr": [0, 1, 2, 3, 4],
 *    "heads": [[3, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}
 *
 * Nodes are in post-order, so inputs always refer to earlier nodes. Loading
 * checks everything (types, ranges, operators, parameters) and reports the
 * JSON path of the first problem; it never trusts an index.
 */
#ifndef DEFT_CORE_JSON_H
#define DEFT_CORE_JSON_H

#include "core/graph/symbol.h"

/* A new NUL-terminated string (free with free()). */
int deft_symbol_to_json(const deft_symbol_t *sym, char **out);
int deft_symbol_from_json(const char *json, deft_symbol_t **out);

/* Largest symbol file read: a generous bound (MXNet's symbol JSON for the
 * largest published models is a few MiB) that keeps a wrong path from
 * filling memory. */
#define DEFT_SYMBOL_FILE_MAX_BYTES ((size_t)256 << 20)

/* Load a symbol from a JSON file: a regular file (not a device, pipe or
 * directory) of at most DEFT_SYMBOL_FILE_MAX_BYTES, read by its size; every
 * error names the path. */
int deft_symbol_from_json_file(const char *path, deft_symbol_t **out);

/* Graphviz DOT text of the graph (free with free()). */
int deft_symbol_to_dot(const deft_symbol_t *sym, char **out);

#endif
