"""How the JIT of a merge job's driver JVM compiles: C2 only for code that stays hot.

A client-mode driver is the JVM ``spark-submit`` starts on the worker; in local mode it does all the merge's
work too. HotSpot compiles a method with C1 after some hundreds of calls and again with C2, its optimizing
compiler, after some thousands. A small merge's driver lives tens of seconds, most of them in Spark's start,
planning and code generation: code that crosses C2's thresholds without ever running long enough to repay
the compiling, which on a two-core worker takes its CPU from the merge itself. With C2's thresholds raised
tenfold, C1 still compiles what it always did and only code that runs hot for long (a large merge's scan and
join loops, millions of calls in) reaches C2. It changes how the JVM compiles, nothing Spark or the merge
does. A ``SPARK_SUBMIT_OPTS`` that already says how to compile is the user's choice and left alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_deltamerge.hooks.class_archive import SUBMIT_OPTS

# HotSpot's defaults are 5,000 (invocations), 15,000 (invocations and loop iterations) and 40,000 (loop
# iterations); the minimum stays below the threshold as in the defaults (600).
C2_LATER = (
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=150000",
    "-XX:Tier4BackEdgeThreshold=400000",
)
# Options by which a user already chose how the JIT compiles.
USERS_OWN = ("-XX:Tier", "TieredCompilation", "-XX:CompileThreshold", "-Xint", "-Xcomp")


def driver_jit_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``SPARK_SUBMIT_OPTS`` raising C2's thresholds for the driver, unless it already says how
    the JIT compiles."""
    opts = env.get(SUBMIT_OPTS, "")
    if any(option in opts for option in USERS_OWN):
        return dict(env)
    return {**env, SUBMIT_OPTS: " ".join(filter(None, [*C2_LATER, opts]))}
