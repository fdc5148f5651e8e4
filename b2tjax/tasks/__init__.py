"""The trainer's Tasks, each a source of prompts, rollouts and rewards for b2tjax.run.trainer.Trainer.

`benchmark`: any sandbox benchmark (BenchmarkTask) with an agent strategy, `single` (one agent) or
`himap` (HiMAP teams); `toy` / `toy_tools`: the digit and lookup tasks that test learning on CPU.
`base` lists the protocols, `spec` what a task reads of the run. Both agents score and summarise
episodes through one path (b2tjax.tasks.scoring).
"""
