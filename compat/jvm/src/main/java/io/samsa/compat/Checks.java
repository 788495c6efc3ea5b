package io.samsa.compat;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.BooleanSupplier;

/**
 * Runs named checks one after another in one JVM and prints one line for each:
 * {@code PASS name} or {@code FAIL name: reason}. A check fails by throwing; the
 * reason is the exception's class and message on one line. The tests read the lines.
 */
final class Checks {
    /** A check: throws when what it checks does not hold. */
    @FunctionalInterface
    interface Check {
        void run() throws Exception;
    }

    private final Map<String, Check> checks = new LinkedHashMap<>();
    private final PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    void add(String name, Check check) {
        if (checks.put(name, check) != null) {
            throw new IllegalArgumentException("check " + name + " added twice");
        }
    }

    /** Runs every check whose name starts with one of {@code only} (all when empty). */
    void runAll(java.util.List<String> only) {
        for (Map.Entry<String, Check> entry : checks.entrySet()) {
            String name = entry.getKey();
            if (!only.isEmpty() && only.stream().noneMatch(name::startsWith)) {
                continue;
            }
            long start = System.nanoTime();
            try {
                entry.getValue().run();
                out.println("PASS " + name);
            } catch (Throwable failure) {
                out.println("FAIL " + name + ": " + describe(failure));
            }
            System.err.printf("%s took %d ms%n", name, (System.nanoTime() - start) / 1_000_000);
        }
        out.println("DONE");
    }

    /** The failure and its causes on one line. */
    static String describe(Throwable failure) {
        StringBuilder text = new StringBuilder();
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (text.length() > 0) {
                text.append(" <- ");
            }
            text.append(t.getClass().getSimpleName());
            if (t.getMessage() != null) {
                text.append(": ").append(t.getMessage());
            }
        }
        return text.toString().replaceAll("\\s+", " ");
    }

    /** Fails with {@code what} unless {@code condition} holds. */
    static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    /** Fails unless {@code actual} equals {@code expected}, saying both. */
    static void checkEqual(Object expected, Object actual, String what) {
        if (!java.util.Objects.equals(expected, actual)) {
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
        }
    }

    /** Waits until {@code condition} holds, checking every 100 ms; fails after {@code timeout}. */
    static void waitUntil(BooleanSupplier condition, Duration timeout, String what)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within " + timeout.toSeconds() + " s: " + what);
            }
            Thread.sleep(100);
        }
    }
}
