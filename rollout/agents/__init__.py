"""Agent episodes on the engine's Episode protocol (rollout/episodes.py): the single tool-using
agent (`single`), HiMAP-Travel's coordinator + day executors (`himap`, whose `HimapTag` decodes
its records' tags) and the one view model of a HiMAP episode's streams (`himap_view`, read by the
notebook and the report). An agent architecture is one module here; the engine knows none.

`agent_episode(visible, benchmark, tokenizer, max_turns=, max_prompt_tokens=, memory=, variant=,
max_response_chars=, python_tool=)` builds the generic tool-using `AgentEpisode` from the
benchmark's prompt (`rollout.prompt.prompt_ids`) and an `EpisodeEnv` on `world_for(visible)`.
"""
