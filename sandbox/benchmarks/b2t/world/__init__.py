"""The travel world: real cities, a deterministic generator, the SQLite store and a user-data loader."""
