#include "core/imperative/record.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/records.h"
#include "core/base/tls.h"
#include "core/imperative/autograd.h"
#include "core/op/op.h"

/* One process-wide lock, reentrant through a per-thread depth (cheaper than a
 * recursive mutex): freeing nodes while holding it frees records, which take it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static DEFT_TLS_FAST int tl_depth;

void deft_record_lock(void) {
    if (tl_depth++ == 0) pthread_mutex_lock(&lock);
}

void deft_record_unlock(void) {
    if (--tl_depth == 0) pthread_mutex_unlock(&lock);
}

/* Drop the kept values no consumer needs. A value whose array is alive
 * stays (it costs no memory: the array holds the same storage), so a
 * parameter used by call after call is not captured afresh each time. */
static void drop_unneeded(deft_record_t *rec) {
    for (int k = 0; rec->pending == 0 && k < rec->num_outputs; k++) {
        if (rec->live[k] && rec->kept[k]) continue;
        deft_ndarray_release(rec->kept[k]);
        rec->kept[k] = NULL;
    }
}

static void drop_kept(deft_record_t *rec) {
    for (int k = 0; k < rec->num_outputs; k++) {
        deft_ndarray_release(rec->kept[k]);
        rec->kept[k] = NULL;
    }
}

void deft_record_drop_inputs(deft_node_t *consumer) {
    deft_record_t *rec = deft_record_of(consumer);
    if (!rec || !rec->holds_inputs) return;
    rec->holds_inputs = false;
    for (int i = 0; i < consumer->num_inputs; i++) {
        deft_record_t *in = deft_record_of(consumer->inputs[i].node);
        if (in && --in->pending == 0) drop_unneeded(in);
    }
}

void deft_record_drop_saved(deft_node_t *node) {
    deft_record_t *rec = deft_record_of(node);
    for (int i = 0; i < node->num_inputs + rec->num_outputs; i++) {
        deft_ndarray_release(rec->saved[i]);
        rec->saved[i] = NULL;
    }
}

/* The node is unreachable: only its pending counts on its inputs are shared. */
static void free_record(deft_node_t *node) {
    deft_record_t *rec = deft_record_of(node);
    if (rec->holds_inputs) {
        deft_record_lock();
        deft_record_drop_inputs(node);
        deft_record_unlock();
    }
    drop_kept(rec);
    deft_record_drop_saved(node);
    deft_ndarray_release(rec->grad);
    node->ext = NULL;
    if (rec->allocation == ALLOC_RECORD)
        deft_record_free(rec);
    else if (rec->allocation == ALLOC_MALLOC)
        free(rec);
}

size_t deft_record_size(int num_inputs, int num_outputs) {
    int slots = 3 * num_outputs + num_inputs; /* live, kept, saved */
    return sizeof(deft_record_t) + (size_t)num_outputs * sizeof(deft_desc_t) +
           (size_t)slots * sizeof(void *);
}

int deft_record_attach(deft_node_t *node, deft_device_t device, const deft_desc_t *desc) {
    int n = node->num_outputs;
    size_t size = deft_record_size(node->num_inputs, n);
    deft_record_t *rec = node->ext_bytes >= size ? node->ext : NULL; /* room made with the node */
    if (!rec) {
        rec = size <= DEFT_RECORD_SIZE ? deft_record_alloc() : malloc(size);
        if (!rec) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a recorded node");
        memset(rec, 0, size);
        rec->allocation = size <= DEFT_RECORD_SIZE ? ALLOC_RECORD : ALLOC_MALLOC;
    }
    rec->device = device;
    rec->training = deft_op_training();
    rec->num_outputs = n;
    rec->desc = (deft_desc_t *)(rec + 1);
    rec->live = (deft_ndarray_t **)(rec->desc + n);
    rec->kept = rec->live + n;
    rec->saved = rec->kept + n;
    for (int k = 0; k < n; k++) rec->desc[k] = desc[k];
    node->ext = rec;
    node->ext_free = free_record;
    return 0;
}

/* Entries change under the lock but are read without it where only the node
 * matters (is there history, does it need a gradient): the node pointer is
 * stored last, with release order, after everything its record says. */
static void publish_entry(deft_ndarray_t *arr, deft_entry_t entry) {
    arr->entry.index = entry.index;
    __atomic_store_n(&arr->entry.node, entry.node, __ATOMIC_RELEASE);
}

static void set_live(deft_record_t *rec, int k, deft_ndarray_t *arr) {
    __atomic_store_n(&rec->live[k], arr, __ATOMIC_RELEASE);
}

int deft_record_new_variable(const deft_ndarray_t *arr, const char *name, deft_node_t **out) {
    deft_node_t *node;
    deft_desc_t desc = {arr->tensor.shape, arr->tensor.dtype};
    if (deft_node_new_variable(name, NULL, 0, NULL, NULL, &node)) return -1;
    if (deft_record_attach(node, arr->tensor.device, &desc)) {
        deft_node_release(node);
        return -1;
    }
    deft_record_of(node)->computed = true;
    *out = node;
    return 0;
}

int deft_record_variable(deft_ndarray_t *arr, const char *name) {
    deft_node_t *node;
    if (deft_record_new_variable(arr, name, &node)) return -1;
    set_live(deft_record_of(node), 0, arr);
    publish_entry(arr, (deft_entry_t){node, 0});
    return 0;
}

int deft_record_input_entries(int nin, deft_ndarray_t *const *in, deft_entry_t *entries) {
    for (int i = 0; i < nin; i++) {
        if (!in[i]->entry.node && deft_record_variable(in[i], NULL)) return -1;
        entries[i] = in[i]->entry;
    }
    return 0;
}

int deft_record_use(const deft_entry_t *entry, deft_ndarray_t *value) {
    deft_record_t *rec = deft_record_of(entry->node);
    if (value && !rec->kept[entry->index] && deft_ndarray_alias(value, &rec->kept[entry->index]))
        return -1;
    rec->pending++;
    return 0;
}

void deft_record_set_entry(deft_ndarray_t *arr, deft_entry_t entry) {
    deft_entry_t old = arr->entry;
    publish_entry(arr,
                  (deft_entry_t){entry.node ? deft_node_retain(entry.node) : NULL, entry.index});
    if (!old.node) return;
    deft_record_t *rec = deft_record_of(old.node);
    if (rec && rec->live[old.index] == arr) {
        set_live(rec, old.index, NULL);
        drop_unneeded(rec);
    }
    deft_node_release(old.node);
}

void deft_record_give_entry(deft_ndarray_t *arr, deft_entry_t entry) {
    publish_entry(arr, entry);
}

void deft_record_set_live(deft_node_t *node, int k, deft_ndarray_t *arr) {
    set_live(deft_record_of(node), k, arr);
}

void deft_record_release_entry(deft_ndarray_t *arr) {
    deft_node_t *node = arr->entry.node;
    deft_record_t *rec = deft_record_of(node);
    /* The slot can only hold this array if it was set when the array was made. */
    if (!rec || __atomic_load_n(&rec->live[arr->entry.index], __ATOMIC_ACQUIRE) != arr) {
        deft_node_release(node);
        return;
    }
    deft_record_lock(); /* once, for the slot and for freeing what the node held */
    set_live(rec, arr->entry.index, NULL);
    drop_unneeded(rec);
    /* A variable's gradient array is its array's: with create_graph, that
     * gradient's history reaches the variable's node, whose record holds the
     * gradient, a cycle that only the variable's own array going can break. */
    deft_ndarray_t *grad = node->op ? NULL : rec->grad;
    if (grad) rec->grad = NULL, rec->grad_req = DEFT_GRAD_REQ_NULL;
    deft_node_release(node);
    deft_ndarray_release(grad);
    deft_record_unlock();
}
