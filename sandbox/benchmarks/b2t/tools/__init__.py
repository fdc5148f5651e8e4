"""The agent tools over the world store (SPEC.md section 3): POI searches, flights, trains, weather,
MapGuide. The ninth, Python, is run by the episode environment (sandbox.env), not here."""
