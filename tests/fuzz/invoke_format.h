/* The byte layout fuzz_invoke decodes (and gen_seeds.c writes). Any bytes
 * decode to some call; these are the meanings:
 *
 *   u8  operator: < 0x80, an index into DeftListOperators() (modulo the
 *       count); else a name of (byte - 0x80) bytes follows (seeds use names)
 *   u8  mode: bits 0-1 INVOKE_MODE_*, then the INVOKE_FLAG_* bits
 *   u8  repeat: < 0xF0: 1 + r % 3 calls; else 250 + 2 * (r - 0xF0) calls,
 *       each feeding its first output into the next call's first input
 *   u8  number of inputs (modulo 9)
 *   per input: u8 dtype (index into fuzz_dtypes), a shape (fuzz_shape:
 *       u8 ndim, then u8 per dimension), u8 fill pattern (FUZZ_FILL_*)
 *   u8  number of parameters (modulo 6)
 *   per parameter: u8 key, u8 value, as below
 *   the rest: bytes for FUZZ_FILL_BYTES
 *
 * Key byte: < 200: the operator's parameter (index modulo its count);
 * 200-239: a fuzzed string (u8 length, bytes); 240-255: a dictionary word.
 * Value byte: < 0xC0: fuzz_words[v % count]; 0xC0-0xDF: the parameter's
 * default; 0xE0-0xEF: one of an enum parameter's words; 0xF0-0xFF: a
 * fuzzed string (u8 length, bytes).
 */
#ifndef DEFT_TESTS_FUZZ_INVOKE_FORMAT_H
#define DEFT_TESTS_FUZZ_INVOKE_FORMAT_H

enum {
    INVOKE_MODE_IMPERATIVE = 0, /* DeftImperativeInvoke, then again into the given outputs */
    INVOKE_MODE_DEFERRED = 1,   /* record, trigger, export, reload, run as a CachedOp */
    INVOKE_MODE_AUTOGRAD = 2,   /* mark the float inputs, record, backward */
    INVOKE_MODE_DEFERRED_AUTOGRAD = 3 /* record lazily while autograd records, backward */
};

enum {
    INVOKE_FLAG_GIVEN_OUTPUTS = 1 << 2,    /* imperative: a second call writes the outputs */
    INVOKE_FLAG_COMPUTE_GRADIENT = 1 << 3, /* DeftAutogradComputeGradient, not Backward */
    INVOKE_FLAG_CREATE_GRAPH = 1 << 4,     /* backward's create_graph */
    INVOKE_FLAG_GRAD_ADD = 1 << 5,         /* DEFT_GRAD_ADD instead of DEFT_GRAD_WRITE */
    INVOKE_FLAG_TRAINING = 1 << 6,         /* DeftAutogradSetIsTraining(1) */
    INVOKE_FLAG_ONE_OUTPUT_SLOT = 1 << 7   /* room for one output only */
};

#define INVOKE_KEY_STRING 200
#define INVOKE_KEY_WORD 240
#define INVOKE_VALUE_DEFAULT 0xC0
#define INVOKE_VALUE_CHOICE 0xE0
#define INVOKE_VALUE_STRING 0xF0

#endif
