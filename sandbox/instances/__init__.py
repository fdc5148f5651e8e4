"""Behavior2Trip-style benchmark instances: profiles, behavior trajectories, instructions, splits.

`generate.generate_split` builds a split from a world store; `loader.load_split` reads (and
validates) generated or user-supplied instance files; `stats.split_stats` gives Table 2 numbers.
"""
