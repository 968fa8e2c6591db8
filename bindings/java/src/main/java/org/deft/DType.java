package org.deft;

/** The element types of deft's arrays, with their DeftDType codes and names. */
public enum DType {
    /** 32-bit IEEE float. */
    FLOAT32(0, "float32", 4),
    /** 64-bit IEEE float. */
    FLOAT64(1, "float64", 8),
    /** 16-bit IEEE float. */
    FLOAT16(2, "float16", 2),
    /** Unsigned 8-bit integer. */
    UINT8(3, "uint8", 1),
    /** Signed 32-bit integer. */
    INT32(4, "int32", 4),
    /** Signed 8-bit integer. */
    INT8(5, "int8", 1),
    /** Signed 64-bit integer. */
    INT64(6, "int64", 8),
    /** Boolean stored in one byte, 0 or 1. */
    BOOL(7, "bool", 1),
    /** bfloat16. */
    BFLOAT16(12, "bfloat16", 2);

    private final int code;
    private final String text;
    private final int size;

    DType(int code, String text, int size) {
        this.code = code;
        this.text = text;
        this.size = size;
    }

    /** @return the DeftDType code (what the C API and CustomOp take) */
    public int code() {
        return code;
    }

    /** @return bytes per element */
    public int size() {
        return size;
    }

    /** @return the name operators' dtype parameters take: "float32", "int64", ... */
    @Override
    public String toString() {
        return text;
    }

    /**
     * @param code a DeftDType code
     * @return the dtype with that code
     * @throws DeftException (VALUE) for a code deft does not have
     */
    public static DType of(int code) {
        for (DType t : values())
            if (t.code == code) return t;
        throw new DeftException(DeftException.Kind.VALUE.ordinal(), "deft has no dtype code " + code);
    }

    /**
     * @param name a dtype name, as {@link #toString()} writes it
     * @return the dtype of that name
     * @throws DeftException (VALUE) for a name deft does not have
     */
    public static DType parse(String name) {
        for (DType t : values())
            if (t.text.equals(name)) return t;
        throw new DeftException(DeftException.Kind.VALUE.ordinal(), "deft has no dtype '" + name
            + "' (float32, float64, float16, uint8, int32, int8, int64, bool, bfloat16)");
    }
}
