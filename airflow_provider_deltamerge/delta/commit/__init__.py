"""The merge's one atomic commit (no pyspark): its actions, the log store's put-if-absent, the conflict
check and rebases, checkpoints, and the deletion vectors written just before it."""
