"""Tool plumbing shared by every benchmark: parameter specs and validation (args), name -> tool dispatch."""
