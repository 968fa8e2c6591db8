package org.deft;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Loads the native libraries once: from the jar (the build puts libdeft and
 * the JNI library libdeftjni under org/deft/native/&lt;os.name&gt;-&lt;os.arch&gt;/,
 * listed in load order in a file named libs), extracted to a temporary
 * folder; or, for a jar built without them, from the folder the system
 * property deft.library.path names, else from java.library.path.
 */
final class NativeLoader {
    private static String source;

    private NativeLoader() {}

    /** The resource folder of this platform's libraries. */
    static String resourceDir() {
        return "/org/deft/native/" + System.getProperty("os.name") + "-"
            + System.getProperty("os.arch") + "/";
    }

    /** Where the libraries were loaded from: "jar", a folder, or "java.library.path". */
    static synchronized String source() {
        load();
        return source;
    }

    static synchronized void load() {
        if (source != null) return;
        String dir = System.getProperty("deft.library.path");
        try {
            if (dir != null) {
                System.load(Path.of(dir, System.mapLibraryName("deftjni")).toAbsolutePath().toString());
                source = dir;
            } else if (loadFromJar()) {
                source = "jar";
            } else {
                System.loadLibrary("deftjni");
                source = "java.library.path";
            }
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("deft: cannot extract the native libraries: " + e);
        } catch (UnsatisfiedLinkError e) {
            UnsatisfiedLinkError error = new UnsatisfiedLinkError(
                "deft: cannot load the native library deftjni (" + e.getMessage() + "); the jar "
                + "carries it for the platform it was built on (" + resourceDir() + " when built "
                + "by `cmake --build build --target java_install`); else set -Ddeft.library.path "
                + "to the folder of libdeftjni");
            error.initCause(e);
            throw error;
        }
    }

    /** Extract and load the jar's libraries; false when it has none for this platform. */
    private static boolean loadFromJar() throws IOException {
        List<String> names = new ArrayList<>();
        try (InputStream list = NativeLoader.class.getResourceAsStream(resourceDir() + "libs")) {
            if (list == null) return false;
            for (String line : new String(list.readAllBytes(), StandardCharsets.UTF_8).split("\n"))
                if (!line.isBlank()) names.add(line.trim());
        }
        Path tmp = Files.createTempDirectory("deft-native-");
        try {
            for (String name : names) {
                Path file = tmp.resolve(name);
                try (InputStream in = NativeLoader.class.getResourceAsStream(resourceDir() + name)) {
                    if (in == null) throw new IOException("the jar lists " + name + " but lacks it");
                    Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                }
                // libdeft first: libdeftjni's dependency on it is then met by
                // the library already loaded (same soname), not by a search.
                System.load(file.toAbsolutePath().toString());
            }
        } finally {
            // A loaded library stays mapped after its file is gone (where the
            // system refuses, the files go at exit).
            for (String name : names) delete(tmp.resolve(name));
            delete(tmp);
        }
        return true;
    }

    private static void delete(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException e) {
            p.toFile().deleteOnExit();
        }
    }
}
