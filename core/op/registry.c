/*
 * The registry: collects every family's table once, sorts it by name for
 * lookup and listing, and parses each operator's defaults ahead of time.
 *
 * Parameter strings are parsed once per distinct set: each thread keeps a
 * few recently parsed sets, and a call whose strings match one reuses it.
 * A loop that calls `_plus_scalar` with scalar="1" a million times parses
 * "1" once; comparing short strings costs a few nanoseconds.
 */
#include "core/op/registry.h"

#include "core/base/error.h"
#include "core/base/tls.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every family's DEFT_OP_FAMILY puts a pointer to it in this section, which
 * the linker brackets with these symbols: a new family is found by being
 * compiled in, with no list to edit. Their order does not matter (the
 * table is sorted by name). */
extern const deft_op_family_t *const __start_deft_op_families[];
extern const deft_op_family_t *const __stop_deft_op_families[];

static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static deft_op_entry_t *entries;
static const char **entry_names;
static int entry_count;
/* Operators added at run time: each entry allocated apart (handles point at
 * it), searched after the table; the name list is rebuilt and the old one
 * kept, since callers may still hold it. Guarded by added_lock. */
static pthread_mutex_t added_lock = PTHREAD_MUTEX_INITIALIZER;
static deft_op_entry_t **added;
static int added_count;
static _Atomic(const char **) all_names;
static const char ***old_names; /* superseded lists, kept: callers may still read them */
static int num_old_names;

static int compare_entries(const void *a, const void *b) {
    return strcmp(((const deft_op_entry_t *)a)->name, ((const deft_op_entry_t *)b)->name);
}

/* A default that does not parse is a bug in an op table, caught by the tests. */
static void parse_defaults(deft_op_entry_t *entry) {
    const deft_op_t *op = entry->op;
    for (int i = 0; op->params && op->params[i].name; i++) {
        entry->num_params = i + 1;
        const deft_param_def_t *def = &op->params[i];
        if (def->type == DEFT_PARAM_STRING) entry->has_string_params = true;
        if (!def->default_value)
            entry->has_required = true;
        else if (deft_param_parse(op, def, def->default_value, &entry->defaults.v[i]))
            fprintf(stderr, "deft: bad default in operator table: %s\n", deft_error_message());
    }
}

/* The operator named `name` in the families' tables, or NULL. */
static const deft_op_t *table_op(const char *name) {
    for (const deft_op_family_t *const *f = __start_deft_op_families; f < __stop_deft_op_families;
         f++)
        for (int i = 0; i < (*f)->count; i++)
            if (!strcmp((*f)->ops[i].name, name)) return &(*f)->ops[i];
    return NULL;
}

static void add_entry(const char *name, const deft_op_t *op) {
    deft_op_entry_t *entry = &entries[entry_count++];
    entry->magic = DEFT_OP_ENTRY_MAGIC;
    entry->name = name;
    entry->op = op;
}

/* Every operator under its name, and each alias as an entry of its own for
 * the same descriptor (an alias of nothing is a bug the tests catch). */
static void build_registry(void) {
    int total = 0;
    for (const deft_op_family_t *const *f = __start_deft_op_families; f < __stop_deft_op_families;
         f++)
        total += (*f)->count;
    for (int a = 0; deft_op_aliases[a].alias; a++) total++;
    entries = calloc((size_t)total, sizeof *entries);
    if (!entries) return;
    for (const deft_op_family_t *const *f = __start_deft_op_families; f < __stop_deft_op_families;
         f++)
        for (int i = 0; i < (*f)->count; i++) add_entry((*f)->ops[i].name, &(*f)->ops[i]);
    for (int a = 0; deft_op_aliases[a].alias; a++) {
        const deft_op_t *op = table_op(deft_op_aliases[a].name);
        if (op) add_entry(deft_op_aliases[a].alias, op);
    }
    qsort(entries, (size_t)entry_count, sizeof *entries, compare_entries);
    entry_names = calloc((size_t)total + 1, sizeof *entry_names);
    for (int i = 0; i < entry_count; i++) {
        parse_defaults(&entries[i]);
        if (entry_names) entry_names[i] = entries[i].name;
    }
}

int deft_registry_count(void) {
    pthread_once(&registry_once, build_registry);
    pthread_mutex_lock(&added_lock);
    int n = entry_count + added_count;
    pthread_mutex_unlock(&added_lock);
    return n;
}

const deft_op_entry_t *deft_registry_at(int index) {
    pthread_once(&registry_once, build_registry);
    if (index >= 0 && index < entry_count) return &entries[index];
    pthread_mutex_lock(&added_lock);
    const deft_op_entry_t *e = index >= entry_count && index < entry_count + added_count
                                   ? added[index - entry_count]
                                   : NULL;
    pthread_mutex_unlock(&added_lock);
    return e;
}

static const deft_op_entry_t *find_added(const char *name) {
    pthread_mutex_lock(&added_lock);
    const deft_op_entry_t *found = NULL;
    for (int i = 0; i < added_count && !found; i++)
        if (!strcmp(added[i]->name, name)) found = added[i];
    pthread_mutex_unlock(&added_lock);
    return found;
}

/* What the per-node and per-call tables rely on, checked for operators
 * added at run time (the built-in tables are checked by the tests). */
static int check_added(const deft_op_t *op) {
    int num_params = 0;
    while (op->params && op->params[num_params].name) num_params++;
    if (!op->name || !*op->name)
        return deft_error(DEFT_ERR_VALUE, "an operator needs a non-empty name");
    if (op->min_inputs < 0 || op->min_inputs > op->max_inputs ||
        op->max_inputs > DEFT_OP_MAX_INPUTS)
        return deft_error(DEFT_ERR_VALUE,
                          "operator '%s' takes %d to %d inputs, expected 0 <= min <= max <= %d",
                          op->name, op->min_inputs, op->max_inputs, DEFT_OP_MAX_INPUTS);
    if (num_params > DEFT_OP_MAX_PARAMS)
        return deft_error(DEFT_ERR_VALUE, "operator '%s' has %d parameters, expected at most %d",
                          op->name, num_params, DEFT_OP_MAX_PARAMS);
    if (!op->infer || !op->forward)
        return deft_error(DEFT_ERR_VALUE, "operator '%s' needs shape inference and a kernel",
                          op->name);
    return 0;
}

int deft_registry_add(const deft_op_t *op) {
    pthread_once(&registry_once, build_registry);
    if (check_added(op)) return -1;
    if (deft_registry_find(op->name))
        return deft_error(DEFT_ERR_VALUE, "an operator named '%s' exists already", op->name);
    deft_op_entry_t *entry = calloc(1, sizeof *entry);
    if (!entry) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot register '%s'", op->name);
    entry->magic = DEFT_OP_ENTRY_MAGIC;
    entry->name = op->name;
    entry->op = op;
    parse_defaults(entry);
    pthread_mutex_lock(&added_lock);
    deft_op_entry_t **grown = realloc(added, (size_t)(added_count + 1) * sizeof *grown);
    const char **names = calloc((size_t)(entry_count + added_count + 2), sizeof *names);
    int status = 0;
    if (grown) added = grown;
    if (!grown || !names) {
        free(names), free(entry);
        status = deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot register '%s'", op->name);
    } else {
        added[added_count++] = entry;
        for (int i = 0; i < entry_count; i++) names[i] = entries[i].name;
        for (int i = 0; i < added_count; i++) names[entry_count + i] = added[i]->name;
        const char **previous = atomic_load(&all_names);
        const char ***kept =
            previous ? realloc(old_names, (size_t)(num_old_names + 1) * sizeof *kept) : old_names;
        if (kept) old_names = kept;
        if (previous && kept) old_names[num_old_names++] = previous;
        atomic_store(&all_names, names);
    }
    pthread_mutex_unlock(&added_lock);
    return status;
}

const deft_op_entry_t *deft_registry_find(const char *name) {
    pthread_once(&registry_once, build_registry);
    int lo = 0, hi = entry_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int cmp = strcmp(name, entries[mid].name);
        if (cmp == 0) return &entries[mid];
        if (cmp < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return find_added(name);
}

const deft_op_entry_t *deft_registry_find_kept(const char *name,
                                               _Atomic(const deft_op_entry_t *) *kept) {
    const deft_op_entry_t *e = atomic_load_explicit(kept, memory_order_acquire);
    if (!e && (e = deft_registry_find(name))) atomic_store_explicit(kept, e, memory_order_release);
    return e;
}

int deft_registry_run_kernel(const char *name, const char *key, const char *value,
                             const deft_tensor_t *in, const deft_tensor_t *out) {
    const deft_op_entry_t *e = deft_registry_find(name);
    if (!e) return deft_error(DEFT_ERR_INTERNAL, "operator '%s' is not registered", name);
    deft_params_t params = e->defaults; /* a local copy: the cache may hold the caller's */
    for (int k = 0; k < e->num_params; k++)
        if (strcmp(e->op->params[k].name, key) == 0 &&
            deft_param_parse(e->op, &e->op->params[k], value, &params.v[k]))
            return -1;
    deft_forward_fn fn = out->device.type == DEFT_DEV_GPU ? e->op->forward_gpu : e->op->forward;
    if (!fn) return deft_op_error(e->op, DEFT_ERR_NOT_IMPLEMENTED, "has no kernel for this device");
    return fn(e->op, params.v, 1, in, 1, out);
}

const char *const *deft_registry_names(void) {
    pthread_once(&registry_once, build_registry);
    const char **names = atomic_load(&all_names);
    return names ? names : entry_names;
}

/* Edit distance, case-insensitive, capped: enough to catch typos in short names. */
static int distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40) return 99;
    int row[41];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

void deft_registry_suggest(const char *name, char *buf, size_t len) {
    pthread_once(&registry_once, build_registry);
    int best = 3;
    const char *match = NULL;
    for (int i = 0; i < entry_count; i++) {
        int d = distance(name, entries[i].name);
        if (d < best) best = d, match = entries[i].name;
    }
    if (match)
        snprintf(buf, len, " (did you mean '%s'?)", match);
    else if (len > 0)
        buf[0] = '\0';
}

const char *const deft_op_data_input[] = {"data", NULL};

int deft_op_error(const deft_op_t *op, deft_error_kind_t kind, const char *fmt, ...) {
    char detail[DEFT_ERROR_MAX];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof detail, fmt, args);
    va_end(args);
    return deft_error(kind, "operator '%s': %s", op->name, detail);
}

int deft_op_input_count_error(const deft_op_t *op, int nin) {
    const char *inputs = nin == 1 ? "input" : "inputs";
    if (op->min_inputs == op->max_inputs)
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d %s, expected %d", nin, inputs,
                             op->min_inputs);
    if (op->max_inputs >= DEFT_OP_MAX_INPUTS)
        return deft_op_error(op, DEFT_ERR_VALUE, "got %d %s, expected at least %d", nin, inputs,
                             op->min_inputs);
    return deft_op_error(op, DEFT_ERR_VALUE, "got %d %s, expected %d to %d", nin, inputs,
                         op->min_inputs, op->max_inputs);
}

/* ---- parameter parsing with a per-thread cache ---- */

#define CACHE_SLOTS 8
#define SET_BATCH   64 /* references to a slot's set taken at once (deft_param_set_take) */
#define CACHE_TEXT  256

typedef struct cache_slot {
    const deft_op_entry_t *entry;
    int n;
    char text[CACHE_TEXT];            /* key\0val\0key\0val\0... */
    unsigned char length[CACHE_TEXT]; /* of each string in text, its NUL included */
    deft_params_t params;
    deft_param_set_t *set; /* the same for nodes to share (NULL: out of memory) */
    int lent;              /* references to set taken ahead for nodes, not handed out yet */
} cache_slot_t;

typedef struct param_cache {
    cache_slot_t slot[CACHE_SLOTS];
    int next;
    int hit;                /* the slot that matched last */
    deft_params_t uncached; /* results too long to cache */
} param_cache_t;

static DEFT_TLS_FAST param_cache_t *tl_params;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t cache_key;

static void release_set(deft_param_set_t *set, int count) {
    if (set && atomic_fetch_sub_explicit(&set->refs, count, memory_order_acq_rel) == count)
        free(set);
}

/* The slot lets go of its set: its own reference and those it took ahead. Nodes that
 * share the set keep it. */
static void drop_set(cache_slot_t *slot) {
    release_set(slot->set, 1 + slot->lent);
    slot->set = NULL;
    slot->lent = 0;
}

/* At thread exit: nodes that share a slot's set keep it. */
static void free_cache(void *arg) {
    param_cache_t *cache = arg;
    for (int s = 0; s < CACHE_SLOTS; s++) drop_set(&cache->slot[s]);
    free(cache);
    tl_params = NULL;
}

static void make_cache_key(void) {
    pthread_key_create(&cache_key, free_cache);
}

static param_cache_t *param_cache(void) {
    if (tl_params) return tl_params;
    pthread_once(&cache_key_once, make_cache_key);
    if ((tl_params = calloc(1, sizeof *tl_params)) != NULL)
        pthread_setspecific(cache_key, tl_params);
    return tl_params;
}

/* Whether s is the string of `len` bytes (its NUL included) at text: two bytes a
 * step, inline (parameter strings are short; a strcmp per string costs more than
 * the loop). A byte of s is read only once the byte before it has matched one of
 * text that is not its NUL, so nothing past the end of s is read. */
static inline bool same_string(const char *text, const char *s, size_t len) {
    size_t i = 0;
    for (; i + 2 <= len; i += 2)
        if (text[i] != s[i] || text[i + 1] != s[i + 1]) return false;
    return i == len || text[i] == s[i];
}

static inline bool slot_matches(const cache_slot_t *slot, const deft_op_entry_t *entry, int n,
                                const char *const *keys, const char *const *vals) {
    if (slot->entry != entry || slot->n != n) return false;
    const char *t = slot->text;
    const unsigned char *len = slot->length;
    for (int i = 0; i < n; i++, len += 2) {
        if (!same_string(t, keys[i], len[0])) return false;
        t += len[0];
        if (!same_string(t, vals[i], len[1])) return false;
        t += len[1];
    }
    return true;
}

static int find_param_index(const deft_op_entry_t *entry, const char *key) {
    for (int p = 0; p < entry->num_params; p++)
        if (strcmp(entry->op->params[p].name, key) == 0) return p;
    return -1;
}

deft_param_set_t *deft_param_set_retain(deft_param_set_t *set) {
    atomic_fetch_add_explicit(&set->refs, 1, memory_order_relaxed);
    return set;
}

/* A reference to the set of this thread's last matched slot goes back to the slot, which takes
 * it as one taken ahead (only this thread counts those): a recorded node freed on the thread that
 * recorded it, the usual case, then drops its set without a locked decrement. Other slots are
 * not searched: their lines are cold by then, and reading them cost more than the decrement. */
void deft_param_set_release(deft_param_set_t *set) {
    param_cache_t *cache = tl_params;
    cache_slot_t *slot = cache ? &cache->slot[cache->hit] : NULL;
    if (set && slot && slot->set == set && slot->lent < INT_MAX) {
        slot->lent++;
        return;
    }
    release_set(set, 1);
}

/* A slot's values and strings (text, n pairs) as a set, in one allocation; NULL when out of
 * memory (nodes then copy them). */
static deft_param_set_t *make_set(const deft_op_entry_t *entry, int n, const char *text,
                                  size_t text_bytes, const deft_params_t *params) {
    size_t head = (sizeof(deft_param_set_t) + 15) & ~(size_t)15;
    size_t values = (size_t)entry->num_params * sizeof(deft_param_value_t);
    deft_param_set_t *set = malloc(head + values + 2 * (size_t)n * sizeof(char *) + text_bytes);
    if (!set) return NULL;
    atomic_init(&set->refs, 1);
    set->entry = entry;
    set->count = n;
    set->v = (deft_param_value_t *)((char *)set + head);
    set->keys = (char **)((char *)set->v + values);
    set->vals = set->keys + n;
    char *own = memcpy(set->vals + n, text, text_bytes);
    if (values) memcpy(set->v, params->v, values);
    for (int i = 0; i < n; i++) { /* sorted by key, as a node keeps its attributes */
        char *key = own, *val = own + strlen(own) + 1;
        own = val + strlen(val) + 1;
        int at = i;
        for (; at > 0 && strcmp(set->keys[at - 1], key) > 0; at--)
            set->keys[at] = set->keys[at - 1], set->vals[at] = set->vals[at - 1];
        set->keys[at] = key, set->vals[at] = val;
        int p = find_param_index(entry, key);
        if (p >= 0 && entry->op->params[p].type == DEFT_PARAM_STRING) set->v[p].s = val;
    }
    return set;
}

deft_param_set_t *deft_param_set_take(const deft_op_entry_t *entry, const deft_param_value_t *v) {
    param_cache_t *cache = tl_params;
    if (!cache) return NULL;
    cache_slot_t *slot = &cache->slot[cache->hit];
    for (int s = 0; slot->params.v != v && s < CACHE_SLOTS; s++) slot = &cache->slot[s];
    if (slot->params.v != v || slot->entry != entry || !slot->set) return NULL;
    /* References are taken a batch at a time: a locked add per recorded call cost as much
     * as a tenth of recording it. Only this thread's slot counts what is left of a batch. */
    if (slot->lent == 0) {
        atomic_fetch_add_explicit(&slot->set->refs, SET_BATCH, memory_order_relaxed);
        slot->lent = SET_BATCH;
    }
    slot->lent--;
    return slot->set;
}

static void slot_store(param_cache_t *cache, const deft_op_entry_t *entry, int n,
                       const char *const *keys, const char *const *vals,
                       const deft_params_t *params) {
    cache_slot_t *slot = &cache->slot[cache->next];
    size_t used = 0;
    /* Its text is rewritten from here on: until it is whole, it matches nothing. */
    slot->entry = NULL;
    drop_set(slot);
    for (int i = 0; i < n; i++) {
        size_t klen = strlen(keys[i]) + 1, vlen = strlen(vals[i]) + 1;
        if (klen > CACHE_TEXT - used || vlen > CACHE_TEXT - used - klen)
            return; /* too long to cache: parse each time */
        memcpy(slot->text + used, keys[i], klen);
        memcpy(slot->text + used + klen, vals[i], vlen);
        slot->length[2 * i] = (unsigned char)klen, slot->length[2 * i + 1] = (unsigned char)vlen;
        used += klen + vlen;
    }
    slot->entry = entry;
    slot->n = n;
    slot->params = *params;
    /* String values must point at the slot's own copy, which outlives the caller's. */
    const char *t = slot->text;
    for (int i = 0; i < n; i++) {
        int p = find_param_index(entry, t);
        t += strlen(t) + 1;
        if (p >= 0 && entry->op->params[p].type == DEFT_PARAM_STRING) slot->params.v[p].s = t;
        t += strlen(t) + 1;
    }
    slot->set = make_set(entry, n, slot->text, used, &slot->params);
    cache->next = (cache->next + 1) % CACHE_SLOTS;
}

static int unknown_param(const deft_op_entry_t *entry, const char *key) {
    char names[512] = "";
    size_t used = 0;
    for (int p = 0; p < entry->num_params && used < sizeof names; p++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", p ? ", " : "",
                                 entry->op->params[p].name);
    return deft_op_error(entry->op, DEFT_ERR_VALUE, "unknown parameter '%s' (parameters: %s)", key,
                         entry->num_params ? names : "none");
}

static int parse_fresh(const deft_op_entry_t *entry, int n, const char *const *keys,
                       const char *const *vals, deft_params_t *out) {
    const deft_op_t *op = entry->op;
    bool given[DEFT_OP_MAX_PARAMS] = {false};
    *out = entry->defaults;
    for (int i = 0; i < n; i++) {
        if (!keys[i] || !vals[i])
            return deft_op_error(op, DEFT_ERR_VALUE, "parameter %d has a NULL %s", i,
                                 keys[i] ? "value" : "key");
        int p = find_param_index(entry, keys[i]);
        if (p < 0) return unknown_param(entry, keys[i]);
        if (given[p])
            return deft_op_error(op, DEFT_ERR_VALUE, "parameter '%s' is given twice", keys[i]);
        given[p] = true;
        if (deft_param_parse(op, &op->params[p], vals[i], &out->v[p])) return -1;
    }
    for (int p = 0; entry->has_required && p < entry->num_params; p++) {
        if (!op->params[p].default_value && !given[p])
            return deft_op_error(op, DEFT_ERR_VALUE, "required parameter '%s' is missing (%s)",
                                 op->params[p].name, op->params[p].doc);
    }
    return 0;
}

/* Out of line: calls without parameters (most) return before it and do not
 * pay for the frame its cache walk needs. */
__attribute__((noinline)) static int parse_through_cache(const deft_op_entry_t *entry, int n,
                                                         const char *const *keys,
                                                         const char *const *vals,
                                                         const deft_params_t **out) {
    if (n < 0 || (n > 0 && (!keys || !vals)))
        return deft_op_error(entry->op, DEFT_ERR_VALUE,
                             "num_params is %d with keys %p and vals %p, expected n >= 0 and "
                             "both arrays when n > 0",
                             n, (const void *)keys, (const void *)vals);
    param_cache_t *cache = param_cache();
    if (!cache) return deft_error(DEFT_ERR_OUT_OF_MEMORY, "cannot allocate a parameter cache");
    /* The slot that matched last first: a loop calls the same operator again and again. */
    if (slot_matches(&cache->slot[cache->hit], entry, n, keys, vals)) {
        *out = &cache->slot[cache->hit].params;
        return 0;
    }
    for (int s = 0; s < CACHE_SLOTS; s++) {
        if (slot_matches(&cache->slot[s], entry, n, keys, vals)) {
            cache->hit = s;
            *out = &cache->slot[s].params;
            return 0;
        }
    }
    deft_params_t parsed;
    if (parse_fresh(entry, n, keys, vals, &parsed)) return -1;
    slot_store(cache, entry, n, keys, vals, &parsed);
    /* Stored in the slot just filled, unless it was too long to cache. */
    cache_slot_t *last = &cache->slot[(cache->next + CACHE_SLOTS - 1) % CACHE_SLOTS];
    if (slot_matches(last, entry, n, keys, vals)) {
        *out = &last->params;
        return 0;
    }
    cache->uncached = parsed;
    *out = &cache->uncached;
    return 0;
}

int deft_op_parse_params(const deft_op_entry_t *entry, int n, const char *const *keys,
                         const char *const *vals, const deft_params_t **out) {
    if (n == 0 && !entry->has_required) {
        *out = &entry->defaults;
        return 0;
    }
    /* A repeat of the last call's strings, the usual case in a loop, is checked here, without
     * the frame of the full walk. */
    const param_cache_t *cache = tl_params;
    if (cache && n > 0 && keys && vals &&
        slot_matches(&cache->slot[cache->hit], entry, n, keys, vals)) {
        *out = &cache->slot[cache->hit].params;
        return 0;
    }
    return parse_through_cache(entry, n, keys, vals, out);
}

int deft_gradient_zero(deft_grad_builder_t *b, const deft_param_value_t *p, int nin,
                       deft_gref_t *in_grads) {
    (void)b, (void)p, (void)nin, (void)in_grads;
    return 0;
}

/* ---- checks shared by infer functions ---- */

int deft_infer_inputs_like_output(const deft_op_t *op, const deft_param_value_t *p, int nin,
                                  deft_desc_t *in, bool *known, const deft_desc_t *out,
                                  const bool *out_known) {
    (void)op, (void)p;
    for (int i = 0; i < nin; i++) {
        if (known[i]) continue;
        if (out_known[0]) {
            in[i] = out[0];
            known[i] = true;
            continue;
        }
        for (int j = 0; j < nin; j++) { /* a sibling input of the same shape */
            if (j != i && known[j]) {
                in[i] = in[j];
                known[i] = true;
                break;
            }
        }
    }
    return 0;
}

int deft_op_check_dtype_float(const deft_op_t *op, int input, deft_dtype_t dtype) {
    if (deft_dtype_is_float(dtype)) return 0;
    return deft_op_error(op, DEFT_ERR_TYPE, "input %d has dtype %s, expected float32 or float64",
                         input, deft_dtype_name(dtype));
}

int deft_op_check_dtype_float_or_half(const deft_op_t *op, int input, deft_dtype_t dtype) {
    if (deft_dtype_is_float(dtype) || deft_dtype_is_half(dtype)) return 0;
    return deft_op_error(op, DEFT_ERR_TYPE,
                         "input %d has dtype %s, expected float32, float64, float16 or bfloat16",
                         input, deft_dtype_name(dtype));
}

int deft_op_check_dtype_arith(const deft_op_t *op, int input, deft_dtype_t dtype) {
    if (deft_dtype_is_arith(dtype)) return 0;
    return deft_op_error(op, DEFT_ERR_TYPE,
                         "input %d has dtype %s, which has no kernel (expected float32, float64, "
                         "int32, int64 or uint8)",
                         input, deft_dtype_name(dtype));
}

int deft_op_check_same_dtype(const deft_op_t *op, int nin, const deft_desc_t *in) {
    for (int i = 1; i < nin; i++) {
        if (in[i].dtype != in[0].dtype)
            return deft_op_error(op, DEFT_ERR_TYPE,
                                 "input %d has dtype %s, expected %s (the dtype of input 0)", i,
                                 deft_dtype_name(in[i].dtype), deft_dtype_name(in[0].dtype));
    }
    return 0;
}

int deft_op_check_optimizer_inputs(const deft_op_t *op, int n, const deft_desc_t *in) {
    if (deft_op_check_dtype_float(op, 0, in[0].dtype) || deft_op_check_same_dtype(op, n, in))
        return -1;
    for (int i = 1; i < n; i++) {
        if (!deft_shape_equal(&in[i].shape, &in[0].shape)) {
            char a[DEFT_SHAPE_STR_MAX], b[DEFT_SHAPE_STR_MAX];
            return deft_op_error(op, DEFT_ERR_VALUE,
                                 "input %d (%s) has shape %s, expected %s (the weight's shape)", i,
                                 op->input_names[i], deft_shape_format(&in[i].shape, b, sizeof b),
                                 deft_shape_format(&in[0].shape, a, sizeof a));
        }
    }
    return 0;
}

int deft_op_check_num_args(const deft_op_t *op, const deft_param_value_t *num_args, int nin) {
    if (!num_args->none && num_args->i != nin)
        return deft_op_error(op, DEFT_ERR_VALUE, "num_args is %lld but %d inputs were given",
                             (long long)num_args->i, nin);
    return 0;
}

int deft_op_axis(const deft_op_t *op, const char *param, int64_t axis, int ndim, int *out) {
    if (axis < -ndim || axis >= ndim)
        return deft_op_error(op, DEFT_ERR_INDEX, "%s is %lld, expected an axis in [%d, %d)", param,
                             (long long)axis, -ndim, ndim);
    *out = (int)(axis < 0 ? axis + ndim : axis);
    return 0;
}

int deft_op_two_outputs(const deft_param_value_t *p, int num_inputs) {
    (void)p, (void)num_inputs;
    return 2;
}

int deft_op_one_visible(const deft_param_value_t *p) {
    (void)p;
    return 1;
}

const char *deft_op_input_name(const deft_op_t *op, int i) {
    if (!op->input_names || !op->input_names[0]) return NULL;
    for (int k = 1; k <= i; k++)
        if (!op->input_names[k]) return op->input_names[0];
    return op->input_names[i];
}

int deft_infer_backward(const deft_op_t *op, deft_infer_fn forward, const deft_param_value_t *p,
                        int nin, const deft_desc_t *in, int *nout, deft_desc_t *out) {
    deft_desc_t y[DEFT_OP_MAX_OUTPUTS];
    int n;
    if (nin < 2) return deft_op_input_count_error(op, nin);
    if (forward(op, p, nin - 1, in + 1, &n, y)) return -1;
    if (!deft_shape_equal(&y[0].shape, &in[0].shape) || y[0].dtype != in[0].dtype) {
        char s[DEFT_SHAPE_STR_MAX], want[DEFT_SHAPE_STR_MAX];
        return deft_op_error(op, DEFT_ERR_VALUE, "input 0 (out_grad) has shape %s, expected %s",
                             deft_shape_format(&in[0].shape, s, sizeof s),
                             deft_shape_format(&y[0].shape, want, sizeof want));
    }
    for (int k = 1; k < nin; k++) out[k - 1] = in[k];
    *nout = nin - 1;
    return 0;
}
