"""The trainer's Tasks, each a source of prompts, rollouts and rewards for b2tjax.run.trainer.Trainer.

`benchmark`: an agent on any sandbox benchmark (BenchmarkTask); `himap`: HiMAP teams on one
(HimapTask, a BenchmarkTask); `toy` / `toy_tools`: the digit and lookup tasks that test learning
on CPU. `himap_agents` holds the HiMAP plan writers of launch/eval.py. The benchmark and HiMAP
tasks score and summarise episodes through one path (b2tjax.tasks.scoring).
"""
