"""The merge benchmark (issue 9): the engine against the rewrite floor and ``deltalake``'s own merge.

Run it with ``python -m bench --scale S`` (or ``make bench SCALE=S``); results go to ``bench/results/``.
"""
