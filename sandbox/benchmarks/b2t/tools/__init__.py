"""The nine agent tools (SPEC.md section 3): POI searches, flights, trains, weather, MapGuide, Python."""
