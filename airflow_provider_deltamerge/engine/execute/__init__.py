"""The executors and the two phases they share (find touched files, rewrite), the sides of
the joins, and the clause output."""
