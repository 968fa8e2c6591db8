package org.deft;

import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.deft.internal.DeftNative;

/**
 * Where an array lives: the CPU, or a GPU by number. Operators take it as their
 * {@code ctx} parameter (written "cpu(0)", "gpu(1)"); a GPU that is not there is an
 * error naming it when an array is made on it.
 */
public final class Device {
    /** The kinds of device; the codes are DLPack's (DeftDeviceType). */
    public enum Type {
        /** Host memory. */
        CPU(1),
        /** An NVIDIA GPU through CUDA. */
        GPU(2);

        private final int code;

        Type(int code) {
            this.code = code;
        }

        /** @return the DeftDeviceType code */
        public int code() {
            return code;
        }
    }

    /** The host. */
    public static final Device CPU = new Device(Type.CPU, 0);

    private static final Pattern TEXT = Pattern.compile("(cpu|gpu)(?:\\((\\d{1,9})\\))?");

    private final Type type;
    private final int id;

    private Device(Type type, int id) {
        this.type = type;
        this.id = id;
    }

    /**
     * @param id the GPU's number, from 0 to {@link #gpuCount()} - 1
     * @return GPU number id (whether it exists is checked when it is used)
     * @throws IllegalArgumentException for a negative id
     */
    public static Device gpu(int id) {
        if (id < 0) throw new IllegalArgumentException("a GPU number is 0 or more, not " + id);
        return new Device(Type.GPU, id);
    }

    /**
     * @param text "cpu", "cpu(0)", "gpu" (GPU 0) or "gpu(N)", as {@link #toString()} writes it
     * @return the device it names
     * @throws DeftException (PARSE) for anything else
     */
    public static Device parse(String text) {
        Matcher m = TEXT.matcher(text == null ? "" : text.trim());
        if (!m.matches())
            throw new DeftException(DeftException.Kind.PARSE.ordinal(),
                                    "'" + text + "' is not a device: cpu, cpu(0), gpu or gpu(N)");
        int id = m.group(2) == null ? 0 : Integer.parseInt(m.group(2));
        return m.group(1).equals("cpu") ? (id == 0 ? CPU : new Device(Type.CPU, id)) : gpu(id);
    }

    /**
     * @param array an open array
     * @return where the array lives
     */
    public static Device of(NDArray array) {
        int[] type = new int[1], id = new int[1];
        DeftNative.DeftNDArrayGetDevice(array.handle(), type, id);
        java.lang.ref.Reference.reachabilityFence(array);
        return new Device(type[0] == Type.GPU.code ? Type.GPU : Type.CPU, id[0]);
    }

    /** @return the GPUs deft can use: 0 without CUDA, a driver or a GPU */
    public static int gpuCount() {
        return Deft.gpuCount();
    }

    /** @return CPU or GPU */
    public Type type() {
        return type;
    }

    /** @return the device's number */
    public int id() {
        return id;
    }

    /**
     * @param dtype the element type
     * @param shape the dimensions
     * @return a new array of zeros on this device
     * @throws DeftException naming the device when it is not there
     */
    public NDArray zeros(DType dtype, long... shape) {
        return new OpArgs(0, 3).tuple("shape", shape).text("dtype", dtype).text("ctx", this)
            .first("_zeros");
    }

    /**
     * @param array the array to copy (on any device)
     * @return a copy of it on this device, computed asynchronously like an operator
     * @throws DeftException naming the device when it is not there
     */
    public NDArray copyOf(NDArray array) {
        NDArray out = zeros(DType.parse(array.dtype()), array.shape());
        try {
            Deft.invokeInto("_copyto", new NDArray[] {array}, new NDArray[] {out});
        } catch (RuntimeException e) {
            out.close();
            throw e;
        }
        return out;
    }

    /** @return "cpu(0)", "gpu(1)": what operators' ctx parameter takes */
    @Override
    public String toString() {
        return (type == Type.GPU ? "gpu(" : "cpu(") + id + ")";
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Device && ((Device) o).type == type && ((Device) o).id == id;
    }

    @Override
    public int hashCode() {
        return type.hashCode() * 31 + id;
    }
}
