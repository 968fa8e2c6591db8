package org.deft;

/**
 * An API object owning one internal handle object: close() deletes it once
 * (the handle's Cleaner is the backstop), and get() refuses a closed object
 * before anything reaches native code.
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
