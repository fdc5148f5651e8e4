"""Tiny Trip: a third benchmark that lives in tests only, registered by one registry line.

It proves the claim of docs/ARCHITECTURE.md that a benchmark is one folder: a one-tool world
(RestaurantLookup), instances, a judge, the reward, an expert, and a HiMAP domain with scripted
policies, and nothing in sandbox/, rollout/ or b2tjax/ edited for it.
"""
