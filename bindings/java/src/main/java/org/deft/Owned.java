package org.deft;

/**
 * An API object owning one internal handle object: close() deletes it once
 * (the handle's Cleaner is the backstop), and get() refuses a closed object
 * before anything reaches native code. The Cleaner watches the handle
 * object, which SWIG's generated calls pass into C as an argument besides
 * its pointer: a native call keeps it reachable until it returns, even when
 * the API object is unreachable by then. (NDArray, the hot path, owns its
 * handle directly and fences itself instead.)
 */
abstract class Owned<H> implements AutoCloseable {
    static {
        Deft.load();
    }

    private final H handle;
    private final Runnable delete;
    private volatile boolean closed;

    Owned(H handle, Runnable delete) {
        this.handle = handle;
        this.delete = delete;
    }

    H get() {
        if (closed) throw new IllegalStateException("the " + getClass().getSimpleName() + " was closed");
        return handle;
    }

    /** Free the handle now; a second close() does nothing. */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        delete.run();
    }
}
