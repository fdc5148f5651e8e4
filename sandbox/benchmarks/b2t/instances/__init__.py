"""Behavior2Trip-style benchmark instances: profiles, behavior trajectories, instructions, splits.

`build.build_benchmark` writes a data directory's splits (expert-validated) and SFT traces;
`generate.make_instance` / `generate.generate_split` make instances from a world store;
`loader.load_split` reads and validates generated or user-supplied instance files;
`stats.split_stats` gives the paper's Table 2 numbers.
"""
