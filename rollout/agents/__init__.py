"""Agent episodes on the engine's Episode protocol (rollout/episodes.py): the single tool-using
agent (`single`), HiMAP-Travel's coordinator + day executors (`himap`) and a readable view of a
HiMAP episode (`himap_view`). An agent architecture is one module here; the engine knows none."""
