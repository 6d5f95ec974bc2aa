"""Planning: the executor for the clause mix, and the target files to read (pruning)."""
