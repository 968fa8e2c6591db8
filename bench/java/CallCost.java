// Per-call cost of x + 1 (_plus_scalar, scalar=1) on a 1-element float32
// array from Java, against the same call made from C in the same process
// and run (c_loop.c, one JNI crossing for all its calls).
//
//   cmake --build build --target java_install deft_bench_java
//   java -cp build/bindings/java/maven/deft-0.1.0.jar \
//        -Ddeft.bench.lib=build/bench/java/libdeft_bench_java.so bench/java/CallCost.java
//
// (java_install also installs the jar into the Maven repository; the jar in
// build/bindings/java/maven is the same.) Java is timed three ways: x.call
// with try-with-resources closing each result; the same with every result
// dropped, the time including the collections and the Cleaner that free them
// (the loop's end waits until deft's live array count is back where it
// started); and Deft.invoke, closing the result. Each variant reports wall
// time and the process's CPU time (all threads: the collector's and the
// Cleaner's work counts) per call. One untimed round warms the JIT, then
// rounds alternate; min and median per call are printed, with the load average.
import com.sun.management.OperatingSystemMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.function.IntToDoubleFunction;
import org.deft.Deft;
import org.deft.NDArray;

public class CallCost {
    static native double cPlusScalar(int n);

    static final int CALLS = 200_000, ROUNDS = 7;
    static final NDArray[] NONE = new NDArray[0];

    static double closed(NDArray x, int n) {
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            try (NDArray y = x.call("_plus_scalar", NONE, "scalar", "1")) {
                // only the call and the free are timed
            }
        }
        Deft.waitAll();
        return (System.nanoTime() - t0) / (double) n;
    }

    static double dropped(NDArray x, int n) throws InterruptedException {
        long before = Deft.liveArrays(), t0 = System.nanoTime();
        for (int i = 0; i < n; i++) x.call("_plus_scalar", NONE, "scalar", "1");
        while (Deft.liveArrays() > before) { // the Cleaner's frees count too
            System.gc();
            Thread.sleep(1);
        }
        return (System.nanoTime() - t0) / (double) n;
    }

    static double invoke(NDArray x, int n) {
        NDArray[] in = {x};
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) Deft.invoke("_plus_scalar", in, "scalar", "1")[0].close();
        Deft.waitAll();
        return (System.nanoTime() - t0) / (double) n;
    }

    interface Variant {
        double run(int n) throws Exception;
    }

    static double[] summary(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return new double[] {s[0], s[s.length / 2]};
    }

    public static void main(String[] args) throws Exception {
        String lib = System.getProperty("deft.bench.lib", "build/bench/java/libdeft_bench_java.so");
        NDArray x = NDArray.of(new float[] {1}, 1); // loads libdeft (from the jar) first
        System.load(Path.of(lib).toAbsolutePath().toString());
        String[] names = {"C", "Java, close each", "Java, dropped (Cleaner)", "Java, Deft.invoke"};
        Variant[] runs = {CallCost::cPlusScalar, n -> closed(x, n), n -> dropped(x, n),
                          n -> invoke(x, n)};
        OperatingSystemMXBean os =
            (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        for (Variant v : runs) v.run(CALLS); // warm-up: the JIT compiles the loops
        double[][] wall = new double[runs.length][ROUNDS], cpu = new double[runs.length][ROUNDS];
        for (int r = 0; r < ROUNDS; r++) { // alternate: each round runs every variant once
            for (int i = 0; i < runs.length; i++) {
                long c0 = os.getProcessCpuTime();
                wall[i][r] = runs[i].run(CALLS);
                if (wall[i][r] < 0) throw new IllegalStateException("the C loop failed");
                cpu[i][r] = (os.getProcessCpuTime() - c0) / (double) CALLS;
            }
        }
        String load = Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
        System.out.printf("x + 1 on a 1-element float32 array, %d calls x %d rounds, load average %s%n",
                          CALLS, ROUNDS, load);
        double cWall = summary(wall[0])[1], cCpu = summary(cpu[0])[1];
        System.out.printf("  %-26s %18s %18s %24s%n", "", "wall min/median", "CPU min/median",
                          "median vs C (wall, CPU)");
        for (int i = 0; i < runs.length; i++) {
            double[] w = summary(wall[i]), c = summary(cpu[i]);
            System.out.printf("  %-26s %7.0f /%7.0f ns %7.0f /%7.0f ns %10.1fx %10.1fx%n", names[i],
                              w[0], w[1], c[0], c[1], w[1] / cWall, c[1] / cCpu);
        }
    }
}
