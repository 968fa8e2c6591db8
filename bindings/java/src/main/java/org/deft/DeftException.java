package org.deft;

/** A failed deft call: the C library's error kind and message. */
public class DeftException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The kinds, as DeftErrorKind in the C API. */
    public enum Kind { NONE, VALUE, TYPE, INDEX, NOT_IMPLEMENTED, OUT_OF_MEMORY, PARSE, INTERNAL }

    private final Kind kind;

    /** Made by the native layer with the kind number and the C message. */
    public DeftException(int kind, String message) {
        super(message);
        this.kind = kind >= 0 && kind < Kind.values().length ? Kind.values()[kind] : Kind.INTERNAL;
    }

    public Kind kind() {
        return kind;
    }
}
