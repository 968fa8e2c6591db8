package org.deft;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.deft.internal.DeftNative;
import org.deft.internal.DeftOp;
import org.deft.internal.DeftSymbol;

/**
 * Writes Nd.java: a typed static method for every operator in deft's registry
 * (DeftListOperators and the operator information), documented from it, as Go's
 * bindings/go/gen and Rust's examples/gen_ops.rs do for theirs.
 *
 * <p>Nd.java is committed, so building the jar needs no step of its own; {@link NdTest}
 * runs {@link #generate()} and fails when the committed file differs from what the
 * library's registry gives now. Regenerate it (from bindings/java, after the CMake build):
 * {@value #REGENERATE}.
 */
public final class NdGenerator {
    static final String REGENERATE = "mvn -o -q -Dmaven.repo.local=/usr/share/maven-repo "
        + "-Ddeft.lib.dir=../../build/bindings/java -Dtest=NdTest -Ddeft.regenerate=true test";

    static final Path FILE = Paths.get("src", "main", "java", "org", "deft", "Nd.java");

    private NdGenerator() {}

    /** A parameter of an operator, from DeftOpGetParam. */
    record Param(String name, String type, String defaultValue, String doc, String[] choices) {
        boolean required() {
            return defaultValue == null;
        }

        String base() {
            return type.endsWith(" or None") ? type.substring(0, type.length() - 8) : type;
        }
    }

    /** An operator, from DeftOpGetInfo, DeftOpGetInputs and its parameters. */
    record Op(String name, String canonical, String description, int minInputs, int maxInputs,
              String[] inputNames, List<Param> params, int outputs) {}

    public static void main(String[] args) throws IOException {
        Path out = args.length > 0 ? Paths.get(args[0]) : FILE;
        Files.write(out, generate().getBytes(StandardCharsets.UTF_8));
    }

    /** The source of Nd.java for the operators registered now. */
    static String generate() {
        Deft.load();
        String[][] names = new String[1][];
        DeftNative.DeftListOperators(names);
        List<Op> ops = new ArrayList<>();
        for (String name : names[0]) ops.add(describe(name));
        return new Writer().file(ops);
    }

    static Op describe(String name) {
        DeftOp op = Deft.op(name);
        String[] canonical = new String[1], description = new String[1];
        DeftNative.DeftOpGetInfo(op, canonical, description);
        int[] min = new int[1], max = new int[1], count = new int[1];
        String[][] inputs = new String[1][];
        DeftNative.DeftOpGetInputs(op, min, max, inputs);
        DeftNative.DeftOpGetNumParams(op, count);
        List<Param> params = new ArrayList<>();
        for (int i = 0; i < count[0]; i++) {
            String[] pname = new String[1], type = new String[1], def = new String[1],
                     doc = new String[1];
            String[][] choices = new String[1][];
            DeftNative.DeftOpGetParam(op, i, pname, type, def, doc);
            DeftNative.DeftOpGetParamChoices(op, i, choices);
            params.add(new Param(pname[0], type[0], def[0], doc[0] == null ? "" : doc[0],
                                 choices[0] == null ? new String[0] : choices[0]));
        }
        String[] inputNames = inputs[0] == null ? new String[0] : inputs[0];
        return new Op(name, canonical[0], description[0] == null ? "" : description[0], min[0],
                      max[0], inputNames, params, countOutputs(op, params));
    }

    /** Placeholders of each parameter type, for countOutputs. */
    private static final Map<String, String> PLACEHOLDERS = Map.of(
        "int", "2", "float", "1", "boolean", "false", "tuple of int", "(2,)", "dtype", "float32",
        "device", "cpu(0)", "string", "");

    /**
     * The outputs op makes with its defaults and a placeholder for each required parameter
     * (the outputs of its symbol composed with variables); -1 when that cannot be told.
     */
    static int countOutputs(DeftOp op, List<Param> params) {
        List<String> keys = new ArrayList<>(), vals = new ArrayList<>();
        for (Param p : params) {
            if (!p.required()) continue;
            String v = p.base().equals("enum") && p.choices().length > 0 ? p.choices()[0]
                                                                          : PLACEHOLDERS.get(p.base());
            if (v == null) return -1;
            keys.add(p.name());
            vals.add(v);
        }
        DeftSymbol[] sym = new DeftSymbol[1];
        try {
            DeftNative.DeftSymbolCreateAtomic(op, keys.size(), keys.toArray(new String[0]),
                                              vals.toArray(new String[0]), sym);
            DeftNative.DeftSymbolCompose(sym[0], null, 0, null, null);
            int[] n = new int[1];
            DeftNative.DeftSymbolGetNumOutputs(sym[0], n);
            return n[0];
        } catch (DeftException e) {
            return -1;
        } finally {
            if (sym[0] != null) sym[0].delete();
        }
    }

    // ---- Java names ----

    static final Set<String> KEYWORDS = Set.of(
        "abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class", "const",
        "continue", "default", "do", "double", "else", "enum", "extends", "final", "finally",
        "float", "for", "goto", "if", "implements", "import", "instanceof", "int", "interface",
        "long", "native", "new", "package", "private", "protected", "public", "return", "short",
        "static", "strictfp", "super", "switch", "synchronized", "this", "throw", "throws",
        "transient", "try", "void", "volatile", "while", "true", "false", "null", "var", "yield",
        "record", "sealed", "permits", "_");

    /** Object's methods: a static method of Nd must not hide one. */
    static final Set<String> OBJECT_METHODS = Set.of(
        "clone", "equals", "finalize", "getClass", "hashCode", "notify", "notifyAll", "toString",
        "wait");

    /** broadcast_add -> broadcastAdd (upper: BroadcastAdd); digits first get an X. */
    static String camel(String name, boolean upper) {
        StringBuilder b = new StringBuilder();
        boolean next = upper;
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (!Character.isLetterOrDigit(c) || c > 127) {
                next = b.length() > 0 || upper;
                continue;
            }
            if (next) c = Character.toUpperCase(c);
            else if (b.length() == 0) c = Character.toLowerCase(c);
            b.append(c);
            next = false;
        }
        String s = b.toString();
        if (s.isEmpty() || Character.isDigit(s.charAt(0))) s = (upper ? "X" : "x") + s;
        return s;
    }

    /** A parameter or input name: lowerCamel, a keyword or a local of Nd's methods gets a _. */
    static String variable(String name) {
        String s = camel(name, false);
        return KEYWORDS.contains(s) || s.equals("opts") || s.equals("call") ? s + "_" : s;
    }

    /** The method of an operator: lowerCamel, internalX for _x, a keyword gets a _. */
    static String method(String op) {
        String s = op.startsWith("_") ? "internal" + camel(op, true) : camel(op, false);
        return KEYWORDS.contains(s) ? s + "_" : s;
    }

    // ---- the file ----

    static final class Writer {
        private final StringBuilder b = new StringBuilder();

        String file(List<Op> ops) {
            b.append(HEADER);
            Map<String, Op> methods = new TreeMap<>(methods(ops));
            for (Map.Entry<String, Op> m : methods.entrySet())
                new OpWriter(b, m.getKey(), m.getValue()).write();
            return b.append("}\n").toString();
        }
    }

    /**
     * The method of each operator. Where two names fold to one method (softmax, Softmax),
     * the operator whose name starts in lower case keeps it, since that is how the method
     * reads; the other gets the suffix Op (Softmax: softmaxOp), unless it is an alias of the
     * first (then one method serves both).
     */
    static Map<String, Op> methods(List<Op> ops) {
        List<Op> order = new ArrayList<>(ops);
        order.sort(Comparator.comparing((Op op) -> Character.isUpperCase(op.name().charAt(0)))
                       .thenComparing(Op::name));
        Map<String, Op> methods = new HashMap<>();
        for (Op op : order) {
            String name = method(op.name());
            Op taken = methods.get(name);
            if (taken != null && taken.canonical().equals(op.canonical())) continue;
            while (methods.containsKey(name) || OBJECT_METHODS.contains(name)) name += "Op";
            methods.put(name, op);
        }
        return methods;
    }

    static final String HEADER = String.join("\n",
        "// Generated by org.deft.NdGenerator (src/test/java) from deft's operator registry;",
        "// DO NOT EDIT. NdTest fails when this file is stale; regenerate it from bindings/java:",
        "// " + REGENERATE,
        "package org.deft;",
        "",
        "/**",
        " * Every operator of deft's registry as a typed static method, documented from the registry:",
        " * {@code Nd.relu(x)}, {@code Nd.sum(x, new Nd.SumOpts().axis(1).keepdims(true))}.",
        " *",
        " * <p>Names: an operator's name in lowerCamelCase ({@code broadcast_add} is",
        " * {@code broadcastAdd}); a name starting with {@code _} gets the prefix {@code internal}",
        " * ({@code _plus_scalar} is {@code internalPlusScalar}); a Java keyword gets a trailing",
        " * {@code _}. Two operators whose names differ only in case share one method when they",
        " * are aliases; otherwise the one whose name starts in lower case keeps the method and",
        " * the other gets the suffix {@code Op} ({@code softmax} is {@code softmax}, {@code Softmax}",
        " * is {@code softmaxOp}), as does a name of Object's methods. Parameters are named the",
        " * same way (a keyword gets a trailing {@code _}).",
        " *",
        " * <p>Types: int is {@code long}, float {@code double}, boolean {@code boolean}, a tuple",
        " * of int {@code long[]}, a dtype {@link DType}, a device {@link Device}; enums and strings",
        " * are {@code String} (the allowed words are listed). Required inputs and parameters are",
        " * arguments; the optional ones are set on the operator's options class",
        " * ({@code Nd.SumOpts}), whose unset fields keep the operator's defaults; each such",
        " * operator has an overload without options. A variadic operator takes an array of",
        " * inputs. An operator with more than one output (or a number that depends on its",
        " * parameters) returns them all; the others return their first output",
        " * ({@link Deft#invoke} returns every output of any operator).",
        " *",
        " * <p>Errors are the library's: a {@link DeftException} naming the bad value.",
        " */",
        "public final class Nd {",
        "    private Nd() {}",
        "",
        "");

    /** What makes HTML or a comment's end in Javadoc, escaped. */
    static String doc(String text) {
        return text.trim().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("@", "&#64;").replace("*/", "*&#47;").replace("{", "&#123;")
            .replace("}", "&#125;").replace("\\u", "&#92;u");
    }

    /** A sentence: ends with a period. */
    static String sentence(String text) {
        String s = text.trim();
        return s.isEmpty() || s.endsWith(".") ? s : s + ".";
    }

    /** A parameter's documentation: its description, choices, and default or "Required". */
    static String paramDoc(Param p) {
        String d = sentence(p.doc());
        if (p.choices().length > 0) d += " One of " + String.join(", ", p.choices()) + ".";
        if (p.required()) d += p.type().endsWith(" or None") ? " Required (null: None)." : " Required.";
        else d += " Default " + p.defaultValue() + ".";
        return doc(d.trim() + " (" + p.name() + ", " + p.type() + ")");
    }

    /** The Java type of a parameter: boxed in options (null: the default). */
    static String javaType(Param p, boolean boxed) {
        boolean none = p.type().endsWith(" or None");
        switch (p.base()) {
        case "int":
            return boxed || none ? "Long" : "long";
        case "float":
            return boxed || none ? "Double" : "double";
        case "boolean":
            return boxed ? "Boolean" : "boolean";
        case "tuple of int":
            return "long[]";
        case "dtype":
            return "DType";
        case "device":
            return "Device";
        default:
            return "String";
        }
    }

    static Param withoutNone(Param p) {
        return new Param(p.name(), p.base(), p.defaultValue(), p.doc(), p.choices());
    }

    /** The OpArgs method that writes a parameter of this type. */
    static String writer(Param p) {
        switch (p.base()) {
        case "int":
            return "integer";
        case "float":
            return "real";
        case "boolean":
            return "bool";
        case "tuple of int":
            return "tuple";
        default:
            return "text";
        }
    }

    /** Writes one operator: its options class, then its methods. */
    static final class OpWriter {
        private final StringBuilder b;
        private final String name, opts;
        private final Op op;
        private final boolean variadic, multi;
        private final List<String> required = new ArrayList<>(), optional = new ArrayList<>();
        private final List<Param> reqParams = new ArrayList<>(), optParams = new ArrayList<>();

        OpWriter(StringBuilder b, String name, Op op) {
            this.b = b;
            this.name = name;
            this.op = op;
            variadic = op.maxInputs() > op.inputNames().length;
            multi = op.outputs() > 1 || (op.outputs() < 0 && !variadic);
            for (int i = 0; i < op.inputNames().length && !variadic; i++) {
                if (i < op.minInputs()) required.add(op.inputNames()[i]);
                else if (i < op.maxInputs()) optional.add(op.inputNames()[i]);
            }
            for (Param p : op.params()) (p.required() ? reqParams : optParams).add(p);
            opts = optional.isEmpty() && optParams.isEmpty()
                       ? null
                       : Character.toUpperCase(name.charAt(0)) + name.substring(1) + "Opts";
        }

        private String variadicName() {
            return variable(op.inputNames().length > 0 ? op.inputNames()[0] : "data");
        }

        void write() {
            if (opts != null) {
                writeOpts();
                writeMethod(false);
            }
            writeMethod(true);
        }

        private void line(String indent, String text) {
            b.append(indent).append(text).append('\n');
        }

        private void writeOpts() {
            line("    ", "/** The optional inputs and parameters of {@link #" + name + "}. */");
            line("    ", "public static final class " + opts + " {");
            for (String in : optional) line("        ", "private NDArray " + variable(in) + ";");
            for (Param p : optParams)
                line("        ", "private " + javaType(p, true) + " " + variable(p.name()) + ";");
            b.append('\n');
            line("        ", "/** Options that keep every default. */");
            line("        ", "public " + opts + "() {}");
            for (String in : optional) {
                String v = variable(in);
                b.append('\n');
                line("        ", "/**");
                line("        ", " * @param " + v + " the optional input " + doc(in));
                line("        ", " * @return these options");
                line("        ", " */");
                line("        ", "public " + opts + " " + v + "(NDArray " + v + ") {");
                line("            ", "this." + v + " = " + v + ";");
                line("            ", "return this;");
                line("        ", "}");
            }
            for (Param p : optParams) {
                // a value: None, where allowed, is what leaving the option unset gives
                String v = variable(p.name()), t = javaType(withoutNone(p), false);
                if (t.equals("long[]")) t = "long...";
                b.append('\n');
                line("        ", "/**");
                line("        ", " * @param " + v + " " + paramDoc(p));
                line("        ", " * @return these options");
                line("        ", " */");
                line("        ", "public " + opts + " " + v + "(" + t + " " + v + ") {");
                line("            ", "this." + v + " = " + v + ";");
                line("            ", "return this;");
                line("        ", "}");
            }
            b.append('\n');
            line("        ", "void addTo(OpArgs call) {");
            if (!optional.isEmpty()) {
                List<String> vars = new ArrayList<>();
                for (String in : optional) vars.add(variable(in));
                line("            ", "call.optionalInputs(\"" + op.name() + "\", "
                                       + String.join(", ", vars) + ");");
            }
            for (Param p : optParams)
                line("            ", "call." + writer(p) + "(\"" + p.name() + "\", "
                                       + variable(p.name()) + ");");
            line("        ", "}");
            line("    ", "}");
            b.append('\n');
        }

        /** The method with all arguments (full) or without the options. */
        private void writeMethod(boolean full) {
            List<String> args = new ArrayList<>();
            boolean varargs = variadic && reqParams.isEmpty() && !(full && opts != null);
            if (variadic) args.add((varargs ? "NDArray... " : "NDArray[] ") + variadicName());
            for (String in : required) args.add("NDArray " + variable(in));
            for (Param p : reqParams) args.add(javaType(p, false) + " " + variable(p.name()));
            if (full && opts != null) args.add(opts + " opts");
            writeDoc(full);
            String result = multi ? "NDArray[]" : "NDArray";
            line("    ", "public static " + result + " " + name + "(" + String.join(", ", args) + ") {");
            if (!full) {
                List<String> pass = new ArrayList<>();
                for (String a : args) pass.add(a.substring(a.lastIndexOf(' ') + 1));
                pass.add("null");
                line("        ", "return " + name + "(" + String.join(", ", pass) + ");");
                line("    ", "}");
                b.append('\n');
                return;
            }
            int inputs = variadic ? 0 : required.size() + optional.size();
            line("        ", "OpArgs call = new OpArgs(" + inputs + ", " + op.params().size() + ");");
            if (variadic) line("        ", "call.inputs(" + variadicName() + ");");
            for (String in : required) line("        ", "call.input(" + variable(in) + ");");
            for (Param p : reqParams) {
                String v = variable(p.name()), put = "call." + writer(p) + "(\"" + p.name() + "\", " + v + ");";
                if (p.type().endsWith(" or None")) // null is None
                    put = "if (" + v + " == null) call.none(\"" + p.name() + "\"); else " + put;
                line("        ", put);
            }
            if (opts != null) line("        ", "if (opts != null) opts.addTo(call);");
            line("        ", "return call." + (multi ? "all" : "first") + "(\"" + op.name() + "\");");
            line("    ", "}");
            b.append('\n');
        }

        private void writeDoc(boolean full) {
            line("    ", "/**");
            String desc = sentence(op.description());
            line("    ", " * " + (desc.isEmpty() ? "Runs the operator." : doc(desc)));
            line("    ", " *");
            String alias = op.canonical().equals(op.name()) ? ""
                                                            : " (an alias of {@code " + op.canonical() + "})";
            line("    ", " * <p>Operator {@code " + op.name() + "}" + alias + ".");
            if (!full) line("    ", " * The optional inputs and parameters keep their defaults.");
            if (variadic)
                line("    ", " *\n     * @param " + variadicName() + " the inputs, " + op.minInputs()
                                  + " to " + op.maxInputs());
            else if (!required.isEmpty() || !reqParams.isEmpty() || (full && opts != null))
                line("    ", " *");
            for (String in : required) line("    ", " * @param " + variable(in) + " input " + doc(in));
            for (Param p : reqParams) line("    ", " * @param " + variable(p.name()) + " " + paramDoc(p));
            if (full && opts != null)
                line("    ", " * @param opts the optional inputs and parameters; null keeps the defaults");
            line("    ", " * @return " + (multi ? "every output" : "the first output"));
            line("    ", " */");
        }
    }

    /** For messages: the lines where two texts first differ. */
    static String firstDifference(String a, String b) {
        List<String> x = Arrays.asList(a.split("\n", -1)), y = Arrays.asList(b.split("\n", -1));
        for (int i = 0; i < Math.max(x.size(), y.size()); i++) {
            String l = i < x.size() ? x.get(i) : "<end of file>", r = i < y.size() ? y.get(i) : "<end of file>";
            if (!l.equals(r)) return "line " + (i + 1) + ":\n  committed: " + l + "\n  registry:  " + r;
        }
        return "no difference";
    }
}
